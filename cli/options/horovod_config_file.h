// horovodrun's --config-file: a YAML file of the same settings as its flags (see Horovod's
// docs, "Horovod config file"). hora reads the subset such files use: `section:` lines and
// indented `key: value` lines under them (and top-level `key: value`), flow mappings
// (`section: {key: value, ...}`), `#` comments, plain, 'single'- or "double"-quoted scalars.
// Anything else is an error naming the file and line.
#pragma once

#include <map>
#include <string>

namespace hora::cli {

// "section.key" (or "key" at the top level) -> the scalar. Throws UsageError.
std::map<std::string, std::string> read_horovod_config_file(const std::string& path);

}  // namespace hora::cli
