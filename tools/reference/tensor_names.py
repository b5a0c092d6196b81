"""The checkpoint tensor names in the two layouts, release (`model.llm.*`) and transformers
(`model.layers.N.*`): the one Python table, read by the reference's loader (inkling_load.py),
the fixture writer (tools/make-tiny/make_tiny.py) and the converter's checker
(tests/convert/check_convert.py). Its C++ twin is engine/model/tensor_names.h.

Rows are (key, release name, transformers name); the key is what inkling_load and make_tiny
call the array. A layer's names follow layer_prefix(). Gate and up: a release checkpoint fuses
them in one tensor, rows interleaved (g0, u0, g1, u1, ...); transformers keeps two tensors for
the dense MLP and the shared experts, and one for the routed experts, grouped (gate rows, then
up rows).

    for key, release_name, hf_name in tensor_names.ATTENTION:
        w[key] = r.get(layer_prefix(release, i) + (release_name if release else hf_name), ...)
"""
RELEASE_PREFIX = "model.llm."

# Whole model.
EMBED = ("embed", "model.llm.embed.weight", "model.embed_tokens.weight")
EMBED_NORM = ("embed_norm", "model.llm.embed_norm.weight", "model.embed_norm.weight")
FINAL_NORM = ("norm", "model.llm.norm.weight", "model.norm.weight")
LM_HEAD = ("lm_head", "model.llm.unembed.weight", "lm_head.weight")  # release: the unpadded rows
TOP = [EMBED, EMBED_NORM, FINAL_NORM, LM_HEAD]
# An older transformers spelling of the embed norm, also read.
EMBED_NORM_IN_EMBED = "model.embed_tokens.embed_norm.weight"

# Per layer: attention, norms and short convs.
ATTENTION = [
    ("attn_norm", "attn_norm.weight", "input_layernorm.weight"),
    ("mlp_norm", "mlp_norm.weight", "post_attention_layernorm.weight"),
    ("wq", "attn.wq_du.weight", "self_attn.q_proj.weight"),
    ("wk", "attn.wk_dv.weight", "self_attn.k_proj.weight"),
    ("wv", "attn.wv_dv.weight", "self_attn.v_proj.weight"),
    ("wr", "attn.wr_du.weight", "self_attn.r_proj.weight"),
    ("wo", "attn.wo_ud.weight", "self_attn.o_proj.weight"),
    ("q_norm", "attn.q_norm.weight", "self_attn.q_norm.weight"),
    ("k_norm", "attn.k_norm.weight", "self_attn.k_norm.weight"),
    ("k_conv", "attn.k_sconv.weight", "self_attn.k_sconv.conv1d.weight"),
    ("v_conv", "attn.v_sconv.weight", "self_attn.v_sconv.conv1d.weight"),
    ("attn_conv", "attn_sconv.weight", "attn_sconv.conv1d.weight"),
    ("mlp_conv", "mlp_sconv.weight", "mlp_sconv.conv1d.weight"),
    ("relp", "attn.rel_logits_proj.proj", "self_attn.rel_logits_proj.proj"),
]

# Per layer: the dense MLP. Gate/up: (release fused, transformers gate, transformers up).
DENSE_GATE_UP = ("mlp.w13_dn.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight")
DENSE = [
    ("down", "mlp.w2_md.weight", "mlp.down_proj.weight"),
    ("dense_scale", "mlp.global_scale", "mlp.global_scale"),
]

# Per layer: the MoE. The routed experts' gate/up is one tensor [E, 2I, D] in both layouts
# (interleaved in release, grouped in transformers).
ROUTER = [
    ("router", "mlp.gate.weight", "mlp.gate.weight"),
    ("router_bias", "mlp.gate.bias", "mlp.gate.e_score_correction_bias"),
    ("router_scale", "mlp.gate.global_scale", "mlp.gate.global_scale"),
]
EXPERTS_GATE_UP = ("x_gate_up", "mlp.experts.w13_weight", "mlp.experts.gate_up_proj")
EXPERTS_DOWN = ("x_down", "mlp.experts.w2_weight", "mlp.experts.down_proj")
SHARED_GATE_UP = ("mlp.shared_experts.shared_w13_weight", "mlp.shared_experts.gate_proj",
                  "mlp.shared_experts.up_proj")
SHARED_DOWN = ("s_down", "mlp.shared_experts.shared_w2_weight", "mlp.shared_experts.down_proj")

# The audio tower (in the model or an audio.safetensors sidecar, in either spelling).
AUDIO = [
    ("audio_enc", "model.audio.encoder.weight", "model.audio_tower.embed_audio_tokens.embed_audio_tokens.weight"),
    ("audio_norm", "model.audio.final_norm.weight", "model.audio_tower.norm.weight"),
]


LAYERS = ("model.llm.layers.", "model.layers.")  # release, transformers


def layer_prefix(release, layer):
    """ "model.llm.layers.N." or "model.layers.N." """
    return f"{LAYERS[0 if release else 1]}{layer}."


def split_layer_name(name):
    """(layer, the name after its layer's prefix) for a layer's tensor in either layout; None
    for any other tensor."""
    for prefix in LAYERS:
        if name.startswith(prefix):
            layer, _, rest = name[len(prefix):].partition(".")
            return int(layer), rest
    return None


def pick(row, release):
    """A row's name in one layout."""
    return row[1] if release else row[2]
