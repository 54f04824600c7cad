// A strict JSON (RFC 8259) reader for checking the timeline file: parse_json() accepts exactly
// valid JSON and throws std::runtime_error with the byte offset otherwise.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hora::test {

// An object's member. Not std::pair<std::string, JsonValue>: a vector of that inside JsonValue
// needs JsonValue complete under clang's libstdc++ instantiation (build-tsan).
struct JsonMember;

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<JsonMember> object;

  // Object member by key, or nullptr.
  const JsonValue* find(const std::string& key) const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

JsonValue parse_json(std::string_view text);

}  // namespace hora::test
