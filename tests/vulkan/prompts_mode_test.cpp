// `--vulkan prompts` (docs/vulkan.md): the chain takes the steps that carry a prompt chunk,
// decode stays on the CPU, batched decode of several sessions included. On lavapipe the
// command line's `prompts` (auto for prompt steps) stays off, so the forward's side of the
// mode is tested here with a chain made directly (Forward::set_chain(chain, true)).
#include <doctest/doctest.h>

#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/weights.h"
#include "engine/sampling/sampler.h"
#include "tests/engine/fixture_paths.h"
#include "tests/vulkan/chain_harness.h"

using namespace inkling;
using namespace chain_harness;

TEST_CASE("vulkan prompts mode: prompt chunks on the device, decode on the CPU, the CPU's tokens") {
    auto model = model::load_model(test_paths::fixtures() / "mixed-hf-f32");
    const auto& c = model.config;
    cpu::ThreadPool pool(2);
    forward::Forward cpu_fw(model, pool), dev_fw(model, pool);
    auto chain = chain_or_skip(model);
    if (!chain) return;
    dev_fw.set_chain(std::move(chain), /*prompts_only=*/true);
    const auto& st = dev_fw.chain()->stats();

    // One session: a prompt in chunks of 7 (3 steps), then 6 decode steps.
    const auto prompt = prompt_for(c, 19);
    check_same(greedy(cpu_fw, c, prompt, 6, 7), greedy(dev_fw, c, prompt, 6, 7));
    CHECK(st.steps == 3);

    // Two sessions decoding in one batch (two rows, one a session) stay on the CPU; a batch
    // with a prompt chunk in it goes to the device.
    auto a = forward::make_session(c, 64), b = forward::make_session(c, 64);
    auto ca = forward::make_session(c, 64), cb = forward::make_session(c, 64);
    const std::vector<std::int32_t> pa = prompt_for(c, 5), pb = prompt_for(c, 9);
    auto batch = [&](forward::Forward& fw, forward::SessionState& x, std::span<const std::int32_t> ix,
                     forward::SessionState& y, std::span<const std::int32_t> iy) {
        const forward::Block blocks[2] = {{&x, ix, nullptr, false}, {&y, iy, nullptr, false}};
        return fw.step_batch(blocks);
    };
    auto want = batch(cpu_fw, ca, pa, cb, pb);
    auto got = batch(dev_fw, a, pa, b, pb);
    CHECK(st.steps == 4);  // two prompts in one step: the device
    for (int i = 0; i < 4; ++i) {
        const std::int32_t ta = static_cast<std::int32_t>(sampling::argmax(want[0]));
        const std::int32_t tb = static_cast<std::int32_t>(sampling::argmax(want[1]));
        CHECK(ta == static_cast<std::int32_t>(sampling::argmax(got[0])));
        CHECK(tb == static_cast<std::int32_t>(sampling::argmax(got[1])));
        CHECK(max_diff(want[0], got[0]) < 1e-4);
        want = batch(cpu_fw, ca, std::span(&ta, 1), cb, std::span(&tb, 1));
        got = batch(dev_fw, a, std::span(&ta, 1), b, std::span(&tb, 1));
    }
    CHECK(st.steps == 4);  // four steps of two decode rows: all on the CPU
    // A decode row beside a prompt chunk: the device again.
    auto d = forward::make_session(c, 64), cd = forward::make_session(c, 64);
    const std::int32_t t = static_cast<std::int32_t>(sampling::argmax(want[0]));
    const auto mixed_want = batch(cpu_fw, ca, std::span(&t, 1), cd, pb);
    const auto mixed_got = batch(dev_fw, a, std::span(&t, 1), d, pb);
    CHECK(st.steps == 5);
    CHECK(max_diff(mixed_want[0], mixed_got[0]) < 1e-4);
    CHECK(max_diff(mixed_want[1], mixed_got[1]) < 1e-4);
    CHECK(dev_fw.take_device_event().empty());
}
