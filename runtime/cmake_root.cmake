# `cmake -P cmake_root.cmake` prints CMAKE_ROOT, where CMake keeps the template of the version file
# that runtime/meson.build configures for a wheel (write_basic_package_version_file()'s).
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${CMAKE_ROOT}")
