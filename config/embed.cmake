# Writes a C file holding a text file as cfg_default_yaml. Run as: cmake -DIN=... -DOUT=... -P
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "/* Generated from ${IN} by config/embed.cmake: do not edit. */\n"
  "#include <stddef.h>\n"
  "const char cfg_default_yaml[] = {${bytes}0x00};\n"
  "const size_t cfg_default_yaml_len = ${len};\n")
