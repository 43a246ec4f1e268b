// One forward step's input: a flat list of rows (tokens) from any number of sequences.
//
//   row r:  token[r], position[r], seq[r] (index into `sequences`), wants_logits[r]
//   sequence s: its KV block tables (one per cache group); after the step they hold every
//               position its rows name
//
// Rows of one sequence appear in increasing position order; a row at position p attends to
// positions [0, p] of its own sequence only, so its result never depends on the other rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv_view.hpp"
#include "ops/attention.hpp"

namespace infer {

// A sequence's KV block tables for the step: BatchSequence(seq_kv) borrows them.
using BatchSequence = SequenceTables;

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq;
  std::vector<uint8_t> wants_logits;
  std::vector<BatchSequence> sequences;

  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
  int64_t logit_rows() const {
    int64_t n = 0;
    for (uint8_t w : wants_logits) n += w != 0;
    return n;
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    wants_logits.clear();
    sequences.clear();
  }
  // The rows as attention sees them (borrowed).
  ops::PagedRows paged_rows() const { return {positions, seq, sequences}; }
  void add(int32_t token, int32_t position, int32_t sequence, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq.push_back(sequence);
    wants_logits.push_back(logits ? 1 : 0);
  }
};

}  // namespace infer
