// GATHER's columns out of its rows: the server's one O(n²) step (rendezvous/store.cc). At 4096
// ranks it moves 16.7 M slices of 4 bytes from 4096 uploads into 4096 answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hora::rdv {

// columns[r][j] = rows[j][r] for slices of `width` bytes: rows[j] holds rank j's upload (one
// slice per rank), columns[r] rank r's column (one slice from every rank). Every byte of every
// column is written. Done in tiles of kTileRows rows by kTileColumns columns: each row's part of a
// tile is read in order (1 KB for 4-byte slices), and the tile's parts of the columns stay in
// cache while they fill; 4-byte slices (hora's mesh: two ports) go 4 x 4 at a time through
// vector registers where the target has SSE2. Row by row instead, every slice read was a cache
// and TLB miss in another rank's upload.
void transpose_slices(const std::vector<const std::uint8_t*>& rows,
                      const std::vector<std::uint8_t*>& columns, std::size_t width);

}  // namespace hora::rdv
