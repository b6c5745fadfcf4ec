#!/usr/bin/env bash
# Installs the Debian packages the project builds with (Catch2 v2, RapidCheck with its Catch
# integration, Eigen 3, nlohmann-json, CLI11, OpenMP (libgomp, with g++), CMake, a C++ compiler). CUDA (nvcc + CUB) comes
# from the CUDA toolkit when present; without it only the CPU targets build. clang, its compiler-rt
# (libFuzzer + sanitizer runtimes) and libomp build the fuzz harnesses (preset `fuzz`).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
pkgs=(cmake g++ make catch2 librapidcheck-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
      clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
