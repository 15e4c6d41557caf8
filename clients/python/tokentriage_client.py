"""The one-file client's name, kept so that `from tokentriage_client import Client` goes on
working: everything is in the tokentriage package now (import tokentriage)."""

from tokentriage import *  # noqa: F401,F403
from tokentriage import Client, TokentriageError, render_headers  # noqa: F401
