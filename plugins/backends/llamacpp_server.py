"""`python -m lceval_plugins.backends.llamacpp_server ARGS...`: llama-cpp-python's
OpenAI-compatible server (`python -m llama_cpp.server`, the same arguments) with the
`llamacpp:` backend's CPU guard: on a CPU with Intel AMX the weights are not repacked for
llama.cpp's AMX kernel, which crashes there (`llamacpp.cpu_repack`). Elsewhere it is the
server unchanged."""

from __future__ import annotations

import runpy


def main() -> None:
    from lceval_plugins.backends.llamacpp import cpu_repack

    with cpu_repack(None):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
