# Writes OUT, a header defining TT_COMMIT: the source tree's git commit (12 hex digits, with
# "-dirty" when tracked files differ from it), or COMMIT when given (-DTT_COMMIT=... at configure
# time: a build from a tarball or a container context without .git), or "unknown". Run at every
# build (cmd/CMakeLists.txt); the file is rewritten only when its text changes, so an unchanged
# commit recompiles nothing. tokentriage_build_info{commit} and `tokentriage version` print it.
# usage: cmake -DSRC=DIR -DOUT=FILE [-DCOMMIT=TEXT] -P commit.cmake
if(COMMIT)
  set(c "${COMMIT}")
else()
  execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE c RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR c STREQUAL "")
    set(c unknown)
  else()
    execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
    if(dirty EQUAL 1)
      string(APPEND c "-dirty")
    endif()
  endif()
endif()
if(NOT c MATCHES "^[A-Za-z0-9._+-]+$") # it becomes a C string and a Prometheus label value
  message(FATAL_ERROR "TT_COMMIT \"${c}\": only letters, digits and . _ + - are allowed")
endif()
set(text "#define TT_COMMIT \"${c}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
