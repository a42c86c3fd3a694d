"""llama-cpp-python's OpenAI-compatible server with one more chat format,
`gemma-system`: Gemma's turns, with the system message at the top of the
first user turn, as Gemma 3's own chat template puts it.

llama-cpp-python's `gemma` format drops the system message (Gemma has no
system role), so an agent step's trusted instructions would never reach
the model. The Gemma 3 270M GGUF carries no chat template of its own, so
one must be named. Arguments are the server's own:

    python gemma_server.py --model M.gguf --chat_format gemma-system ...
"""

import runpy

from llama_cpp.llama_chat_format import ChatFormatterResponse, register_chat_format


@register_chat_format("gemma-system")
def format_gemma_system(messages, **kwargs):
    system = "\n\n".join(message["content"] for message in messages if message["role"] == "system")
    prompt = ""
    for message in (message for message in messages if message["role"] != "system"):
        role = "model" if message["role"] == "assistant" else "user"
        content = message["content"] or ""
        if system and role == "user":
            content, system = f"{system}\n\n{content}", ""
        prompt += f"<start_of_turn>{role}\n{content}<end_of_turn>\n"
    return ChatFormatterResponse(prompt=prompt + "<start_of_turn>model\n", stop="<end_of_turn>")


if __name__ == "__main__":
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
