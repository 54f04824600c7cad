// GATHER's records as they travel in its answer (docs/rendezvous.md, "GATHER's records"):
// every record is coded against the one before it, as its length and the byte ranges that
// differ. The ranks of a host send records that differ in a byte or two (their local rank), so
// a record costs about 5 bytes instead of its ~50, and decoding is a copy of the previous
// record plus a patch: memcpy speed, where inflating a zlib stream of the same records took
// 3 times as long (every rank decodes every rank's record: N x N records in a job).
//
// The block, inside the answer's payload:
//   n u32 | total u32 | coded bytes
// `total` is the sum of the n records' lengths; `coded` (a length-prefixed field) holds, per
// record: len varint | patches varint | patches x (skip varint, lit varint, raw[lit]). A record
// starts as the first min(len, previous len) bytes of the previous record (the first record's
// previous is empty); each patch skips `skip` bytes from where the last one ended (from 0) and
// overwrites `lit` bytes. Bytes past the previous record's length must come from patches.
// Varints are LEB128: 7 bits a byte, low first, the high bit set on all but the last; at most
// 5 bytes and 32 bits.
#pragma once

#include <span>

#include "rendezvous/wire.h"

namespace hora::rdv::wire {

// Decodes the records block at the reader's position into m->records_buffer and m->records.
// Throws DecodeError for a malformed block (see wire::decode_gather_reply).
void read_gather_records(Reader& r, GatherReplyView* m);

}  // namespace hora::rdv::wire
