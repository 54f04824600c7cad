#include "cli/options/horovod_config_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/base/errors.h"
#include "cli/options/option_file.h"

namespace hora::cli {
namespace {

// A config file lists a few dozen settings; 1 MiB is the bound of an ssh_config (ssh/config.cc).
constexpr std::size_t kMaxBytes = 1u << 20;

// Aliases can make a small file name a huge tree ("billion laughs"); hora reads at most this many
// entries, counting each time an alias or merge is followed, and refuses a file that asks for more.
constexpr std::size_t kMaxEntries = 100000;

// horovodrun's top-level keys (its config_parser.py). Any other top-level key whose mapping is
// used elsewhere through an alias or merge only holds an anchor (`defaults: &d {...}`), as
// horovodrun, which reads only its own keys, treats it.
constexpr std::string_view kSections[] = {"params",          "autotune", "timeline",  "stall_check",
                                          "library_options", "logging",  "controller"};

// "PATH:LINE:COL" of a node or error (yaml-cpp counts from 0; editors from 1).
std::string place(const std::string& path, const YAML::Mark& mark) {
  if (mark.is_null()) return path;
  return fmt::format("{}:{}:{}", path, mark.line + 1, mark.column + 1);
}

// The first '[' or '{' that is never closed, outside quotes and comments, as (line, column),
// 1-based; (0, 0) when every one closes. yaml-cpp reports an unclosed flow collection at the end
// of the file; the user wants the bracket's place, to find the typo.
std::pair<int, int> unclosed_bracket(std::string_view text) {
  std::vector<std::pair<int, int>> open;
  int line = 1, column = 0;
  char quote = 0;
  bool comment = false;
  char previous = '\n';
  for (const char c : text) {
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      comment = false;
    } else if (comment) {
    } else if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '#' && (previous == ' ' || previous == '\t' || previous == '\n')) {
      comment = true;
    } else if ((c == '\'' || c == '"') &&
               (previous == ' ' || previous == '\t' || previous == '\n' || previous == '[' ||
                previous == '{' || previous == ',' || previous == ':')) {
      quote = c;
    } else if (c == '[' || c == '{') {
      open.emplace_back(line, column);
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    }
    previous = c;
  }
  return open.empty() ? std::pair{0, 0} : open.front();
}

UsageError syntax_error(const std::string& path, std::string_view text,
                        const YAML::ParserException& e) {
  // "end of sequence flow not found", "end of map flow not found": say where it opened.
  if (e.msg.find("flow not found") != std::string::npos) {
    const auto [line, column] = unclosed_bracket(text);
    if (line != 0) {
      std::size_t start = 0;
      for (int l = 1; l < line; ++l) start = text.find('\n', start) + 1;
      return UsageError(
          fmt::format("--config-file {}:{}:{}: YAML syntax error: '{}' is never closed ({})", path,
                      line, column, text[start + static_cast<std::size_t>(column) - 1], e.msg));
    }
  }
  return UsageError(
      fmt::format("--config-file {}: YAML syntax error: {}", place(path, e.mark), e.msg));
}

std::string what_it_is(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return fmt::format("'{}'", node.Scalar());
    default: return "nothing";
  }
}

// safe_load refuses the tags that build Python objects (`!!python/...`) and unknown local tags;
// hora refuses every tag but YAML's own (`!!str`, `!!int`, ...) and the quoted scalars' '!'.
void check_tag(const std::string& path, const YAML::Node& node) {
  const std::string& tag = node.Tag();
  if (tag.empty() || tag == "?" || tag == "!") return;
  constexpr std::string_view kYaml = "tag:yaml.org,2002:";
  constexpr std::string_view kSafe[] = {"str",  "int",   "float", "bool",   "null",
                                        "map",  "seq",   "merge", "binary", "timestamp",
                                        "omap", "pairs", "set"};
  if (tag.rfind(kYaml, 0) == 0 &&
      std::find(std::begin(kSafe), std::end(kSafe), tag.substr(kYaml.size())) != std::end(kSafe)) {
    return;
  }
  throw UsageError(fmt::format(
      "--config-file {}: the tag '{}' is not one yaml.safe_load reads (give the plain value)",
      place(path, node.Mark()), tag));
}

void take(const std::string& path, std::size_t& budget) {
  if (budget == 0) {
    throw UsageError(fmt::format(
        "--config-file {}: its aliases and merge keys expand to more than {} entries (give the "
        "settings themselves)",
        path, kMaxEntries));
  }
  --budget;
}

// Whether `map` names `target` as one of its values or merge sources, itself or through its
// merge sources.
bool uses(const std::string& path, const YAML::Node& map, const YAML::Node& target,
          std::size_t& budget) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    take(path, budget);
    if (value.is(target)) return true;
    if (!key.IsScalar() || key.Scalar() != "<<") continue;
    if (value.IsMap() && uses(path, value, target, budget)) return true;
    if (value.IsSequence()) {
      for (const YAML::Node& s : value) {
        if (s.is(target) || (s.IsMap() && uses(path, s, target, budget))) return true;
      }
    }
  }
  return false;
}

// A top-level entry that only holds an anchor: not one of horovodrun's keys, and its mapping is
// used by another top-level entry.
bool anchor_holder(const std::string& path, const YAML::Node& root, const std::string& key,
                   const YAML::Node& value, std::size_t& budget) {
  if (!value.IsMap()) return false;
  if (std::find(std::begin(kSections), std::end(kSections), key) != std::end(kSections)) {
    return false;
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node other = it->second;
    take(path, budget);
    if (other.is(value)) {
      const YAML::Node name = it->first;
      if (name.IsScalar() && name.Scalar() == key) continue;  // its own definition
      return true;
    }
    if (other.IsMap() && uses(path, other, value, budget)) return true;
  }
  return false;
}

// A mapping's entries as PyYAML's safe_load sees them: `<<` merges the entries of the mapping
// (or list of mappings) it names, which the mapping's own keys override and, in a list, earlier
// mappings override later ones; a key given twice keeps its last value. In file order.
std::vector<std::pair<std::string, YAML::Node>> entries(const std::string& path,
                                                        const YAML::Node& map, std::size_t& budget,
                                                        int depth = 0) {
  if (depth > 32) {
    throw UsageError(fmt::format("--config-file {}: merge keys ('<<') nested more than 32 deep",
                                 place(path, map.Mark())));
  }
  std::vector<std::pair<std::string, YAML::Node>> merged, own;
  auto put = [](std::vector<std::pair<std::string, YAML::Node>>& into, const std::string& key,
                const YAML::Node& value) {
    for (auto& [k, v] : into) {
      if (k == key) {
        v = value;
        return;
      }
    }
    into.emplace_back(key, value);
  };
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    take(path, budget);
    if (!key.IsScalar()) {
      throw UsageError(fmt::format("--config-file {}: a key is {}, not a name",
                                   place(path, key.Mark()), what_it_is(key)));
    }
    check_tag(path, key);
    if (key.Scalar() == "<<" && key.Tag() != "!") {
      std::vector<YAML::Node> sources;
      if (value.IsMap()) {
        sources.push_back(value);
      } else if (value.IsSequence()) {
        for (const YAML::Node& s : value) sources.push_back(s);
      }
      if (sources.empty() ||
          std::any_of(sources.begin(), sources.end(), [](auto& s) { return !s.IsMap(); })) {
        throw UsageError(fmt::format(
            "--config-file {}: a merge key ('<<') takes a mapping or a list of mappings (such "
            "as *defaults), got {}",
            place(path, value.Mark()), what_it_is(value)));
      }
      // Earlier sources win: put the later ones first.
      for (auto s = sources.rbegin(); s != sources.rend(); ++s) {
        for (auto& [k, v] : entries(path, *s, budget, depth + 1)) put(merged, k, v);
      }
      continue;
    }
    put(own, key.Scalar(), value);
  }
  for (auto& [k, v] : own) put(merged, k, v);
  return merged;
}

// One setting's value: a scalar, or null (left out).
void add_setting(const std::string& path, const std::string& key, const YAML::Node& value,
                 std::map<std::string, std::string>& out) {
  if (value.IsNull()) return;
  if (!value.IsScalar()) {
    throw UsageError(fmt::format(
        "--config-file {}: {}: {} is nested deeper than horovodrun's settings (section, then "
        "key: value)",
        place(path, value.Mark()), key, what_it_is(value)));
  }
  check_tag(path, value);
  out[key] = value.Scalar();
}

}  // namespace

std::map<std::string, std::string> read_horovod_config_file(const std::string& path) {
  const std::string text = read_option_file("--config-file", path, kMaxBytes,
                                            "horovodrun's YAML config file (a few KiB of "
                                            "'section:' and 'key: value' lines)");
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw syntax_error(path, text, e);
  } catch (const YAML::Exception& e) {
    throw UsageError(fmt::format("--config-file {}: YAML error: {}", path, e.what()));
  }
  std::map<std::string, std::string> out;
  if (documents.size() > 1) {
    throw UsageError(fmt::format(
        "--config-file {}: holds {} YAML documents ('---'); horovodrun reads a single one",
        place(path, documents[1].Mark()), documents.size()));
  }
  if (documents.empty() || documents[0].IsNull()) return out;  // empty, or only comments
  const YAML::Node& root = documents[0];
  if (!root.IsMap()) {
    throw UsageError(fmt::format(
        "--config-file {}: the file holds {}, not a mapping of settings (such as 'params:' "
        "with 'fusion_threshold_mb: 64' under it)",
        place(path, root.Mark()), what_it_is(root)));
  }
  try {
    std::size_t budget = kMaxEntries;
    for (const auto& [key, value] : entries(path, root, budget)) {
      if (anchor_holder(path, root, key, value, budget)) continue;
      if (value.IsMap()) {
        for (const auto& [name, setting] : entries(path, value, budget)) {
          add_setting(path, key + "." + name, setting, out);
        }
      } else {
        add_setting(path, key, value, out);
      }
    }
  } catch (const YAML::Exception& e) {
    throw UsageError(fmt::format("--config-file {}: YAML error: {}", path, e.what()));
  }
  return out;
}

}  // namespace hora::cli
