// Shared by the pipeline tests (pipeline_test, hybrid_pipeline_test): random slice tables and the
// fixtures' 64-token float64 references cut to a prompt's length.
#pragma once

#include "core/tensor.h"
#include "io/npy.h"
#include "test_util.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace huddle::testing {

// A slice table whose entry for n tokens is a random cut of n (fixed seed): slices of every
// length, uneven, so each stage sees KV caches of every offset.
inline std::vector<std::vector<std::int64_t>> random_slice_table(std::int64_t max_tokens,
                                                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<std::int64_t>> table;
  for (std::int64_t n = 1; n <= max_tokens; ++n) {
    std::vector<std::int64_t> cut;
    for (std::int64_t left = n; left > 0;) {
      const std::int64_t len = std::uniform_int_distribution<std::int64_t>(1, left)(rng);
      cut.push_back(len);
      left -= len;
    }
    table.push_back(cut);
  }
  return table;
}

// Rows [0, n) of the fixture's 64-token float64 reference: a causal model's logits for the first
// n tokens do not depend on the later ones.
inline Tensor reference_rows(const std::string& model, std::int64_t n) {
  const Tensor all = io::read_npy(fixture("references/" + model + ".64.npy"));
  return all.rows(0, n).clone();
}

// The first n ids of the fixture's 64-token prompt.
inline std::vector<std::int32_t> reference_ids(const std::string& model, std::int64_t n) {
  auto ids = read_ids(fixture("references/" + model + ".64.ids.json"));
  ids.resize(static_cast<std::size_t>(n));
  return ids;
}

}  // namespace huddle::testing
