// Whole-file writes that a reader never sees half done: a temporary file beside the target,
// flushed to disk, then renamed over it (rename is atomic within one file system).
#pragma once

#include <string>

namespace ouro::trainer {

// Throws std::runtime_error naming path and the system's reason; the temporary is removed on
// failure, and an existing file at path is left as it was.
void writeFileAtomic(const std::string& path, const std::string& content);

// The whole file; throws std::runtime_error naming path and the reason.
std::string readFile(const std::string& path);

// The folder a file would be created in ("." for a bare name).
std::string parentFolder(const std::string& path);

}  // namespace ouro::trainer
