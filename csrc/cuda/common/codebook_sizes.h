// Sizes of the codebook tables the kernels copy into shared memory, as plain constexpr C++ so
// that the planner (src/) sizes shared memory exactly as the kernels do.
#pragma once

#include "lowbit/formats/codebook_data.h"
#include "lowbit/formats/common.h"

namespace lowbit::cuda_detail {

// Entries of a format's grid (0: no grid) and the bytes of one entry.
constexpr int codebook_entries(Codebook book) {
  switch (book) {
    case Codebook::kIq2xxs:
      return LOWBIT_IQ2XXS_GRID_SIZE;
    case Codebook::kIq2xs:
      return LOWBIT_IQ2XS_GRID_SIZE;
    case Codebook::kIq2s:
      return LOWBIT_IQ2S_GRID_SIZE;
    case Codebook::kIq3xxs:
      return LOWBIT_IQ3XXS_GRID_SIZE;
    case Codebook::kIq3s:
      return LOWBIT_IQ3S_GRID_SIZE;
    case Codebook::kIq1s:
      return LOWBIT_IQ1S_GRID_SIZE;
    case Codebook::kNone:
      return 0;
  }
  return 0;
}
constexpr int codebook_entry_bytes(Codebook book) {
  return book == Codebook::kIq3xxs || book == Codebook::kIq3s ? 4 : 8;
}
constexpr int codebook_bytes(Codebook book) {
  return codebook_entries(book) * codebook_entry_bytes(book);
}

// The int8 kernels' decode table: the format's grid, except IQ1 whose ternary rows are packed
// to nibbles (pack_ternary_row: half the bytes of the int8 rows).
template <class Traits>
inline constexpr int kInt8TableBytes =
    Traits::kCodebook == Codebook::kIq1s ? LOWBIT_IQ1S_GRID_SIZE * 4 : codebook_bytes(Traits::kCodebook);
static_assert(LOWBIT_IQ1S_GRID_SIZE * 4 % 16 == 0, "the packed IQ1 table is whole 16-byte words");

// The lane kernel's decode table holds kGridCopies<Traits> interleaved copies of each grid entry,
// each lane reading copy lane % copies: from one copy a warp's 32 random lookups collide in
// shared-memory banks (about 3.5 wavefronts each), from their own copies they do not (32 copies
// of 4-byte entries, 16 of 8-byte ones). Capped near 64 KB, IQ3_S's at 32 KB (16 copies): every
// block builds its table before its first weight, which at one token is on each call's chain, and
// IQ3_S's lookups lose nothing with two lanes per copy (benchmarks/NOTES.md, "grid table capped").
// IQ1 keeps one copy (eight measured no faster: benchmarks/NOTES.md, f675193).
// grid_copies: the copies that fit cap_bytes.
template <class Traits>
constexpr int grid_copies(int cap_bytes) {
  constexpr Codebook kBook = Traits::kCodebook;
  constexpr int bytes = codebook_bytes(kBook);
  if (bytes == 0 || kBook == Codebook::kIq1s) return 1;
  int copies = 128 / codebook_entry_bytes(kBook);
  while (copies > 1 && bytes * copies > cap_bytes) copies /= 2;
  return copies;
}
template <class Traits>
inline constexpr int kGridCopies = grid_copies<Traits>(Traits::kCodebook == Codebook::kIq3s ? 32 * 1024 : 64 * 1024);

}  // namespace lowbit::cuda_detail
