#include "engine/convert/options.h"

#include <stdexcept>

namespace inkling::convert {

DenseMode parse_dense_mode(const std::string& name) {
    if (name == "keep") return DenseMode::Keep;
    if (name == "int8") return DenseMode::Int8;
    if (name == "int4g64") return DenseMode::Int4g64;
    throw std::invalid_argument("--dense: unknown mode '" + name + "' (keep, int8 or int4g64)");
}

const char* dense_mode_name(DenseMode m) {
    switch (m) {
    case DenseMode::Keep: return "keep";
    case DenseMode::Int8: return "int8";
    case DenseMode::Int4g64: return "int4g64";
    }
    return "?";
}

nlohmann::json Options::output_options() const {
    return {{"experts", experts::format_name(experts)},
            {"expert_group", experts == experts::Format::Int4 ? kExpertGroup : 0},
            {"dense", dense_mode_name(dense)},
            {"keep_audio", keep_audio}};
}

}  // namespace inkling::convert
