// Which memory a call's buffers are in, and whether that suits the stream it was issued on
// (docs/API.md "Device buffers"). The classification is a replaceable function so the tests can
// make any pointer "device memory" on machines without a GPU; nothing is cached per pointer (an
// address may be freed and reused as the other kind between two calls).
#pragma once

#include <initializer_list>

#include "comm/exec/executor.hpp"

namespace ouro {

using PointerKindFn = BufferKind (*)(const void* ptr);

// The installed classification: cudaPointerGetAttributes in CUDA builds on machines with a
// device, else "host" for every pointer.
BufferKind pointerKind(const void* ptr);
// Replaces the classification (nullptr restores the default); returns the previous one. Tests only.
PointerKindFn setPointerKindFunction(PointerKindFn fn);

// Copies `bytes` from src, in host or device memory (pointerKind), to host memory at dst; for a
// scalar read when a host call runs (a pre-multiplied sum's ouroScalarDevice scalar).
void copyToHost(void* dst, const void* src, size_t bytes);

struct NamedBuffer {
  const char* name;  // "sendbuff"
  const void* ptr;   // nullptr: not used by this call (skipped)
};

// Checks that every buffer is the same kind and that the stream takes that kind; returns it
// (the stream's kind when no buffer is given). `stream_kind` is nullptr for a blocking call.
// Mixed kinds and host buffers on a CUDA stream: kInvalidArgument naming both; device buffers
// without a CUDA stream: kInvalidUsage saying how to get one.
BufferKind checkBufferKinds(int rank, const char* call, std::initializer_list<NamedBuffer> buffers,
                            const BufferKind* stream_kind);

}  // namespace ouro
