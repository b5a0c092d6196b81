// Which CPUs this process may run on, and pinning the calling thread to one of them
// (the bandwidth probe's readers). POSIX: sched_getaffinity, pthread_setaffinity_np.
// Windows: the process affinity mask (the first 64 logical CPUs), SetThreadAffinityMask.
#pragma once

#include <vector>

namespace inkling::platform {

std::vector<int> allowed_cpus();
void pin_this_thread(int cpu);

}  // namespace inkling::platform
