# System libraries, all from Debian's packages (see scripts/deps.sh). Nothing is vendored.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_search_module(MSGPACK REQUIRED IMPORTED_TARGET msgpack-c msgpack msgpackc)
if(TT_TESTS)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
endif()
# libhttp-parser (the HTTP front door's parser) ships no pkg-config file: found by its header
# and library.
find_path(HTTP_PARSER_INCLUDE_DIR http_parser.h REQUIRED)
find_library(HTTP_PARSER_LIBRARY http_parser REQUIRED)
add_library(tt_http_parser INTERFACE)
target_include_directories(tt_http_parser INTERFACE ${HTTP_PARSER_INCLUDE_DIR})
target_link_libraries(tt_http_parser INTERFACE ${HTTP_PARSER_LIBRARY})
