// Prints hora::version() and HORA_VERSION_STRING (test/install/meson.build compares them with
// `horarun --version`).
#include <hora/version.h>

#include <cstdio>

int main() { std::printf("%s %s\n", hora::version(), HORA_VERSION_STRING); }
