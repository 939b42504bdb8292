// Weights converted at load (any `--weight-dtype` conversion) are
// owned copies: the model keeps them for later binds (re-plans, weights sent to workers), so an
// executor that packs them cannot let them go as it lets a mapped checkpoint's pages go, and they
// would be held twice. WeightSpill writes each one, as it is made, to a temporary file whose name
// is removed as soon as it is made (nothing is left behind, however the process ends), and hands
// back views of that file's mapping: like a mapped checkpoint, resident only while read, and read
// again from the file when needed again.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace huddle {

class WeightSpill {
 public:
  // The file goes in $TMPDIR, else /var/tmp (on disk where /tmp may be memory), else the system's
  // temporary directory, made at the first add(). Where none takes a file, add() declines.
  WeightSpill();
  explicit WeightSpill(const std::filesystem::path& dir);
  ~WeightSpill();
  WeightSpill(const WeightSpill&) = delete;
  WeightSpill& operator=(const WeightSpill&) = delete;

  // Appends a contiguous tensor's bytes. False when the file cannot take them (it could not be
  // made, or a write failed: the disk is full); the caller then keeps the tensor itself, and
  // later calls decline too.
  bool add(const std::string& name, const Tensor& t);

  // Maps the file (the mapping keeps it) and returns a view of it per added tensor. Empty when
  // nothing was added.
  std::unordered_map<std::string, Tensor> finish();

 private:
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t offset;
  };
  bool open_file();

  std::filesystem::path dir_;
  int fd_ = -1;
  bool failed_ = false;  // no file could be made, or a write failed: decline from then on
  std::uint64_t size_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace huddle
