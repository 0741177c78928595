// POSIX shared-memory segments. A rank creates its own segment (name holds its pid), peers on the
// host map it, and the owner unlinks the name as soon as every peer has mapped it, so nothing is
// left in /dev/shm after a normal exit, an abort or a crash (mappings outlive the name). A crash
// inside that short window leaves a name whose pid is dead; removeStaleSegments() clears those.
#pragma once

#include <cstddef>
#include <string>

namespace ouro::transport::shm {

class Segment {
 public:
  Segment() = default;
  // Creates and maps `bytes` of zeroed shared memory under `name` ("/ouro-..."), reserving the
  // pages now (posix_fallocate) so a full /dev/shm is a clear error here rather than a SIGBUS at
  // first touch or a failed cudaHostRegister later. `settings` names what sizes it, for the
  // remedy ("OURO_SHM_SLOTS / OURO_SHM_SLOT_BYTES").
  static Segment create(const std::string& name, size_t bytes,
                        const std::string& settings = "OURO_SHM_SLOTS / OURO_SHM_SLOT_BYTES");
  // Maps an existing segment; its size must be `bytes`.
  static Segment open(const std::string& name, size_t bytes);

  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  void unlinkName();  // idempotent
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;
};

// A fresh segment name for this process: "/ouro-<pid>-<counter>-<random>".
std::string newSegmentName();

// Unlinks /dev/shm/ouro-<pid>-* segments whose creating process no longer exists.
void removeStaleSegments();

}  // namespace ouro::transport::shm
