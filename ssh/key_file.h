// What hora can tell about a key file before offering it to a server: whether it exists, its
// .pub half's fingerprint, and whether a passphrase protects it.
#pragma once

#include <string>

namespace hora::ssh {

// The first line of a text file; empty when unreadable.
std::string read_first_line(const std::string& path);

// Fingerprint of an OpenSSH .pub file ("type base64 comment"), or empty when unreadable.
std::string pub_file_fingerprint(const std::string& path);

// True for an existing regular file.
bool file_exists(const std::string& path);

// Whether a private key file is protected by a passphrase, judged from its text (see key_file.cc).
bool key_file_is_encrypted(const std::string& path);

}  // namespace hora::ssh
