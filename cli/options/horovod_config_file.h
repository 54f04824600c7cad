// horovodrun's --config-file: a YAML file of the same settings as its flags (see Horovod's
// docs, "Horovod config file"). Parsed with yaml-cpp, so it takes what horovodrun's
// `yaml.safe_load` takes: block and flow mappings, anchors and aliases, merge keys (`<<: *d`),
// quoted scalars, comments. A syntax error names the file, line and column.
#pragma once

#include <map>
#include <string>

namespace hora::cli {

// "section.key" (or "key" at the top level) -> the scalar's text. A null value (`~`, `null` or
// nothing) is left out, as horovodrun leaves such a setting unset. A key given twice keeps its
// last value (PyYAML's rule). Throws UsageError.
std::map<std::string, std::string> read_horovod_config_file(const std::string& path);

}  // namespace hora::cli
