// A model file's type as llama.cpp names it ("Q4_0", "Q4_K - Medium", "F16", "all F32"): the
// `general.file_type` key (llama.cpp's llama_ftype) when the file has it, else a guess from the
// type most of its tensors have, marked "(guessed) " as llama.cpp marks it.
#pragma once

#include <string>

#include "format/model_file.hpp"

namespace infer {

std::string file_type_name(const ModelFile& file);

}  // namespace infer
