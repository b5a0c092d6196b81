#include "platform/cpu_affinity.h"

#include <windows.h>

namespace inkling::platform {

std::vector<int> allowed_cpus() {
    DWORD_PTR process = 0, system = 0;
    std::vector<int> out;
    if (GetProcessAffinityMask(GetCurrentProcess(), &process, &system))
        for (int c = 0; c < 64; ++c)
            if (process & (DWORD_PTR{1} << c)) out.push_back(c);
    return out;
}

void pin_this_thread(int cpu) {
    if (cpu >= 0 && cpu < 64) SetThreadAffinityMask(GetCurrentThread(), DWORD_PTR{1} << cpu);
}

}  // namespace inkling::platform
