// cxxopts as every binary here includes it. A repeatable flag's value is one element,
// whatever it holds: cxxopts splits vector values at commas by default, so
// `--engine-arg=--stop=a,b` reached the engine as two arguments and
// `--cors-origin=https://a.example,https://b.example` as two origins. NUL never occurs in
// an argument, so with it as the delimiter nothing is split. Include this, never
// <cxxopts.hpp> itself: the delimiter must be the same in every translation unit.
#pragma once

#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>
