// A thread's scratch vector for the kernels: grown as needed, kept for the thread's life,
// so a decode step does not allocate. Each call site names its own Tag (two sites with the
// same element type must not share a vector).
//
// On Windows the vector is allocated once a thread and never freed: a thread_local with a
// destructor crashed, now and then, when a pool worker ended under mingw-w64's winpthreads
// (seen under Wine: a read of address -1 inside ntdll at exit, after the output was
// written; never with one thread). Pool threads live as long as the process there anyway.
#pragma once

#include <cstddef>
#include <vector>

namespace inkling::cpu {

template <class T, class Tag>
std::vector<T>& thread_scratch() {
#ifdef _WIN32
    thread_local std::vector<T>* scratch = new std::vector<T>();
    return *scratch;
#else
    thread_local std::vector<T> scratch;
    return scratch;
#endif
}

// At least n elements of a buffer kept across calls, their values unspecified: it only grows.
// A vector resized down for a decode step and back up for a prompt chunk clears the
// difference each time, and one allocated afresh for each layer went back to the system when
// freed and came back as zeroed pages: a third of the time a 2,048-token prefill's engine
// thread spent alone (page faults, page clearing and fills).
template <class T, class Allocator>
T* at_least(std::vector<T, Allocator>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

}  // namespace inkling::cpu
