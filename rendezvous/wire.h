// The rendezvous wire format, shared by the server (launcher) and the client (every rank).
// docs/rendezvous.md describes every byte; this header is the single definition.
//
// A connection carries frames. Each frame is a 16-byte header followed by `payload_bytes` bytes:
//
//   offset  size  field
//   0       2     magic "HR" (0x48 0x52)
//   2       1     version (kVersion)
//   3       1     op (Op)
//   4       1     status (Status; 0 in every request)
//   5       3     reserved, zero
//   8       4     request id, uint32 little-endian (0 for frames that answer no request)
//   12      4     payload length, uint32 little-endian
//
// Integers are little-endian; a "string" or "bytes" field is a uint32 length and that many bytes.
// The whole frame (header + payload) may not exceed the receiver's max_frame_bytes.
//
// Handshake: the server sends HELLO{nonce[32]}; the client answers AUTH{rank, size,
// HMAC-SHA256(secret, nonce || int32le(rank))}; the server answers AUTH with status OK, or
// REJECT{reason} and closes. Afterwards the client sends requests; each response carries the
// request's op and id, a status, and either the op's result (OK) or a message string (otherwise).
// The server may push ABORT{reason} (id 0) at any time after authentication.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace hora::rdv::wire {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint8_t kMagic0 = 0x48;  // 'H'
inline constexpr std::uint8_t kMagic1 = 0x52;  // 'R'
// 2: GATHER answers carried their records zlib-compressed (measured: a 4096-rank mesh exchange
// moved 270 KB to every rank, mostly the same host's records again and again).
// 3: they carry them coded against the previous record instead (rendezvous/gather_records.h):
// as small, and decoded at memcpy speed where inflating took most of a rank's GATHER time.
inline constexpr std::uint8_t kVersion = 4;
inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;
// AUTH payload: int32 rank, int32 size, proof. The only payload an unauthenticated peer may send.
inline constexpr std::size_t kAuthPayloadBytes = 4 + 4 + kProofBytes;
// Default for ServerOptions::max_frame_bytes and ClientOptions::max_frame_bytes.
inline constexpr std::size_t kDefaultMaxFrameBytes = 64u << 20;
// Smallest max_frame_bytes that still lets the handshake through.
inline constexpr std::size_t kMinMaxFrameBytes = 1024;
// Largest max_frame_bytes: below 4 GiB, so every payload length fits the 32-bit field.
inline constexpr std::size_t kMaxMaxFrameBytes = 0xFFFFFFFFu;

// `n` as a 32-bit length field; throws std::length_error naming `what` when it does not fit
// (the caller must not narrow it silently).
std::uint32_t length_u32(std::size_t n, const char* what);

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// GOODBYE's optional one-byte payload: the rank leaves from an exit handler (the program called
// exit() or returned from main without hora::shutdown()), so the process is ending and its exit
// code, not the goodbye, says whether it succeeded. A GOODBYE without payload is hora::shutdown().
constexpr std::uint8_t kGoodbyeAtExit = 0x01;
// The reason on_disconnected reports for such a goodbye (clean = true).
inline constexpr const char* kGoodbyeAtExitReason = "said goodbye from an exit handler";

// The key under which a rank stores (SET) the global rank of the peer whose loss made its first
// collective fail (a PeerFailure): the launcher reads it to name the rank that failed first.
inline std::string peer_lost_key(int rank) { return "hora/peer-lost/" + std::to_string(rank); }

enum class Op : std::uint8_t {
  kHello = 0x01,     // server -> client, first frame: nonce
  kAuth = 0x02,      // client -> server: rank, size, proof; answered with AUTH/OK
  kReject = 0x03,    // server -> client: reason; the server closes the connection after it
  kAbort = 0x04,     // server -> client, unsolicited: the launcher aborted the job
  kGoodbye = 0x05,   // client -> server: leaving (payload: none, or kGoodbyeAtExit); GOODBYE/OK
  kReset = 0x06,     // server -> client, unsolicited: an elastic job's next round (Reset)
  kSet = 0x10,       // key, value
  kGet = 0x11,       // key, timeout_ms -> value
  kAdd = 0x12,       // key, delta -> new value
  kDel = 0x13,       // key -> existed
  kBarrier = 0x14,   // name, timeout_ms
  kExchange = 0x15,  // name, timeout_ms, slices -> column
  kGather = 0x16,    // name, timeout_ms, record, width, fixed-width slices -> records, column
};

enum class Status : std::uint8_t {
  kOk = 0,
  kTimeout = 1,  // the request's deadline passed; message says what was missing
  kInvalid = 2,  // well-formed but unservable (wrong slice count, not a counter, ...)
  kAborted = 3,  // the job was aborted; message is the launcher's reason
  // Rejections (in REJECT frames; the server closes the connection afterwards).
  kBadFrame = 16,          // bad magic, non-zero reserved bytes or status, malformed payload
  kBadVersion = 17,        // version byte is not kVersion
  kTooLarge = 18,          // frame exceeds max_frame_bytes
  kUnknownOp = 19,         // op byte is not an Op, or not one a client may send
  kNotAuthenticated = 20,  // a request before AUTH
  kAuthFailed = 21,        // wrong proof (different secret)
  kAuthTimeout = 22,       // no AUTH within the server's auth_timeout
  kSizeMismatch = 23,      // AUTH size differs from the job's size
  kRankOutOfRange = 24,    // AUTH rank not in [0, size)
  kDuplicateRank = 25,     // the rank already has a live connection
};

const char* op_name(Op op);              // "GET"; "op 0x7f" style names are built by callers
const char* status_name(Status status);  // "TIMEOUT"
bool is_known_op(std::uint8_t op);
bool is_known_status(std::uint8_t status);
// Ops a client sends after authenticating (requests); everything else is server-only.
bool is_request_op(Op op);

struct Header {
  std::uint8_t version = kVersion;
  Op op = Op::kHello;
  Status status = Status::kOk;
  std::uint32_t request_id = 0;
  std::uint32_t payload_bytes = 0;
};

void encode_header(const Header& header, std::uint8_t* out /* kHeaderBytes */);

// Decodes and validates a header: magic, version, reserved bytes, op and status known, frame
// (header + payload) within max_frame_bytes. On failure returns the rejection status and sets
// *why to a sentence naming the offending field; *out is filled as far as it could be decoded
// (request_id is always set, so a REJECT can echo it).
Status decode_header(std::span<const std::uint8_t, kHeaderBytes> bytes, std::size_t max_frame_bytes,
                     Header* out, std::string* why);

// When the first bytes of a connection are an HTTP request ("PUT /global/rank_0 ...", "GET /x"),
// their printable start (method and as much of the path as arrived); otherwise nullopt. A
// program of Horovod's own package speaks HTTP to whatever HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT
// name: seen on a hora port, that tells the launcher what kind of program reached it.
std::optional<std::string> http_request_start(std::span<const std::uint8_t, kHeaderBytes> bytes);

// Writes the header of a frame in place: `frame` starts with kHeaderBytes bytes reserved for it,
// followed by the payload (so a response built that way is sent without another copy).
// `payload_bytes`: the payload's length when part of it is sent from other buffers after
// `frame`; by default the rest of `frame`.
void frame_in_place(Op op, Status status, std::uint32_t request_id, Bytes& frame,
                    std::optional<std::size_t> payload_bytes = std::nullopt);

// A whole frame: header followed by payload.
Bytes encode_frame(Op op, Status status, std::uint32_t request_id,
                   std::span<const std::uint8_t> payload);

// Thrown when a payload is truncated, has trailing bytes, or a length field is impossible.
class DecodeError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Appends fields to a payload.
class Writer {
 public:
  Writer& u8(std::uint8_t v);
  Writer& u32(std::uint32_t v);
  Writer& i32(std::int32_t v);
  Writer& u64(std::uint64_t v);
  Writer& i64(std::int64_t v);
  Writer& raw(std::span<const std::uint8_t> v);    // no length prefix
  Writer& bytes(std::span<const std::uint8_t> v);  // uint32 length + bytes
  Writer& str(std::string_view v);                 // uint32 length + bytes
  void reserve(std::size_t n) { buf_.reserve(n); }
  Bytes take() { return std::move(buf_); }
  std::size_t size() const { return buf_.size(); }

 private:
  Bytes buf_;
};

// Reads fields from a payload; every read checks the remaining length and throws DecodeError.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> payload) : rest_(payload) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int32_t i32();
  std::uint64_t u64();
  std::int64_t i64();
  void raw(std::span<std::uint8_t> out);
  Bytes bytes();
  // A length-prefixed field as a view into the payload (no copy).
  std::span<const std::uint8_t> view();
  // The next n bytes as a view (no length prefix, no copy).
  std::span<const std::uint8_t> fixed(std::size_t n);
  std::string str();
  std::size_t remaining() const { return rest_.size(); }
  // Throws DecodeError if bytes are left over.
  void expect_end() const;

 private:
  std::span<const std::uint8_t> take(std::size_t n, const char* what);
  std::span<const std::uint8_t> rest_;
};

// Payloads, one struct per message shape. decode_* throws DecodeError.
struct Hello {
  Nonce nonce{};
};
struct AuthRequest {
  std::int32_t rank = 0;
  std::int32_t size = 0;
  Proof proof{};
};
struct SetRequest {
  std::string key;
  Bytes value;
};
// GET and BARRIER: a key (or barrier name) and how long the server may hold the request.
struct WaitRequest {
  std::string key;
  std::uint64_t timeout_ms = 0;
};
struct AddRequest {
  std::string key;
  std::int64_t delta = 0;
};
struct DelRequest {
  std::string key;
};
// RESET (docs/elastic.md): the receiving worker's place in round `round` of an elastic job.
struct Reset {
  std::uint32_t round = 0;
  bool interrupt = false;  // a worker was lost: abort what is in flight
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::int32_t local_rank = 0;
  std::int32_t local_size = 0;
  std::int32_t cross_rank = 0;
  std::int32_t cross_size = 0;
  std::int32_t host_index = 0;
  std::string rendezvous;  // host:port of the round's server, as this worker's host reaches it
  bool operator==(const Reset&) const = default;
};
struct ExchangeRequest {
  std::string name;
  std::uint64_t timeout_ms = 0;
  std::vector<Bytes> slices;  // slices[i] is addressed to rank i
};

Bytes encode(const Hello& m);
Bytes encode(const AuthRequest& m);
Bytes encode(const Reset& m);
Bytes encode(const SetRequest& m);
Bytes encode(const WaitRequest& m);
Bytes encode(const AddRequest& m);
Bytes encode(const DelRequest& m);
Bytes encode(const ExchangeRequest& m);
// EXCHANGE without copying: encodes straight from the caller's slices, and decodes into views
// of the payload (valid while the payload buffer lives and is not resized).
Bytes encode_exchange(std::string_view name, std::uint64_t timeout_ms,
                      const std::vector<Bytes>& slices);
struct ExchangeView {
  std::string name;
  std::uint64_t timeout_ms = 0;
  std::vector<std::span<const std::uint8_t>> slices;
};
ExchangeView decode_exchange_view(std::span<const std::uint8_t> payload);

// GATHER: one record for every rank plus one fixed-width slice per rank (`slices` holds
// count x width bytes, slice i addressed to rank i). The answer holds every rank's record and
// this rank's column (count x width bytes, entry j from rank j).
Bytes encode_gather(std::string_view name, std::uint64_t timeout_ms,
                    std::span<const std::uint8_t> record, std::uint32_t width, std::uint32_t count,
                    std::span<const std::uint8_t> slices);
struct GatherView {
  std::string name;
  std::uint64_t timeout_ms = 0;
  std::span<const std::uint8_t> record;
  std::uint32_t width = 0;
  std::uint32_t count = 0;
  std::span<const std::uint8_t> slices;  // count x width bytes
};
// Throws DecodeError; count x width must be exactly the bytes that follow.
GatherView decode_gather_view(std::span<const std::uint8_t> payload);
// The OK answer to GATHER:
//   n u32 | total u32 | coded bytes | width u32 | raw[n x width]
// where `coded` (a length-prefixed field) holds the n records (`total` bytes in all), each
// coded against the one before (rendezvous/gather_records.h). The records part is the same in
// every rank's answer: the server builds and codes it once (encode_gather_records).
inline constexpr std::size_t kMaxGatherRecordsBytes = std::size_t{1} << 30;
Bytes encode_gather_records(std::span<const std::span<const std::uint8_t>> records);
// Decoded: the records into `records_buffer` (views into it; moving the struct keeps
// them valid), the column as a view into `payload`.
struct GatherReplyView {
  Bytes records_buffer;
  std::vector<std::span<const std::uint8_t>> records;  // records[j]: rank j's record
  std::uint32_t width = 0;
  std::span<const std::uint8_t> column;  // records.size() x width bytes
};
// Throws DecodeError for a malformed answer, records that do not decode to exactly `total`
// bytes, or a `total` above kMaxGatherRecordsBytes or above what the coded bytes can hold
// (checked before allocating).
GatherReplyView decode_gather_reply(std::span<const std::uint8_t> payload);

Hello decode_hello(std::span<const std::uint8_t> payload);
AuthRequest decode_auth(std::span<const std::uint8_t> payload);
// Also checks the numbers: 0 <= rank < size, 0 <= local_rank < local_size <= size, 0 <=
// cross_rank < cross_size <= size, host_index >= 0.
Reset decode_reset(std::span<const std::uint8_t> payload);
SetRequest decode_set(std::span<const std::uint8_t> payload);
WaitRequest decode_wait(std::span<const std::uint8_t> payload);
AddRequest decode_add(std::span<const std::uint8_t> payload);
DelRequest decode_del(std::span<const std::uint8_t> payload);
ExchangeRequest decode_exchange(std::span<const std::uint8_t> payload);

// Response payloads with status OK: GET -> bytes value; ADD -> int64; DEL -> uint8 existed;
// EXCHANGE -> slice list (uint32 count, then count bytes fields); others empty.
// Any other status (and REJECT, ABORT): a single string, the message.
Bytes encode_bytes(std::span<const std::uint8_t> value);
Bytes decode_bytes(std::span<const std::uint8_t> payload);
Bytes encode_i64(std::int64_t v);
std::int64_t decode_i64(std::span<const std::uint8_t> payload);
Bytes encode_u8(std::uint8_t v);
std::uint8_t decode_u8(std::span<const std::uint8_t> payload);
Bytes encode_slices(const std::vector<Bytes>& slices);
std::vector<Bytes> decode_slices(std::span<const std::uint8_t> payload);
Bytes encode_message(std::string_view text);
std::string decode_message(std::span<const std::uint8_t> payload);

// Bytes on the wire of a slice list with these sizes (for frame-limit checks before encoding).
std::size_t slices_wire_bytes(const std::vector<Bytes>& slices);

}  // namespace hora::rdv::wire
