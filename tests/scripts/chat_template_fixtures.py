"""Reference renderings for the C++ chat templates (tests/core/test_chat_template.cpp), made by transformers' own
Jinja renderer, the one apply_chat_template(..., add_generation_prompt=True, tokenize=False) uses.

  python chat_template_fixtures.py OUT.json          # writes the fixtures
  python chat_template_fixtures.py --check IN.json   # exit 1 if IN.json differs from what transformers renders now

Templates: SmolLM2-135M-Instruct's (as its GGUF carries it), Qwen2's ChatML with a default system prompt, plain
ChatML, Llama-3-Instruct, Llama-2-chat and Mistral-7B-Instruct-v0.1, copied from the models' tokenizer configs.
"""
import json, sys

from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATES = {
    "smollm2": (r"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
                "<|im_start|>", "<|im_end|>"),
    "qwen2": (r"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
              "", "<|im_end|>"),
    "chatml": (r"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
               "", "<|im_end|>"),
    "llama3": (r"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
               "<|begin_of_text|>", "<|eot_id|>"),
    "llama2": (r"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
               "<s>", "</s>"),
    "mistral": (r"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
                "<s>", "</s>"),
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "  Hi there \n"}, {"role": "assistant", "content": " Hello. How can I help?\n"},
     {"role": "user", "content": "Write a haiku\nabout rain.\t"}],
    [{"role": "user", "content": "unicode: caf\u00e9 \u65e5\u672c\u8a9e \U0001F642 and 'quotes' \"too\""}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "empty system"}],
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],  # does not alternate
    [{"role": "user", "content": ""}],
]


def build():
    cases = []
    for name, (tmpl, bos, eos) in TEMPLATES.items():
        for i, conv in enumerate(CONVERSATIONS):
            for gen in (True, False):
                case = {"template_name": name, "template": tmpl, "bos_token": bos, "eos_token": eos,
                        "messages": conv, "add_generation_prompt": gen}
                try:
                    out, _ = render_jinja_template(conversations=[conv], chat_template=tmpl,
                                                   add_generation_prompt=gen, bos_token=bos, eos_token=eos)
                    case["expected"] = out[0]
                except Exception as e:  # the template refuses this conversation (raise_exception)
                    case["error"] = str(e)
                cases.append(case)
    return {"generator": "tests/scripts/chat_template_fixtures.py (transformers render_jinja_template)",
            "cases": cases}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        want = build()
        have = json.load(open(sys.argv[2]))
        bad = [i for i, (a, b) in enumerate(zip(want["cases"], have["cases"])) if a != b]
        if bad or len(want["cases"]) != len(have["cases"]):
            print(f"FAIL: {sys.argv[2]} differs from transformers' renderings (cases {bad[:10]})")
            sys.exit(1)
        print(f"ok: {len(have['cases'])} fixtures equal transformers' renderings")
        sys.exit(0)
    with open(sys.argv[1], "w") as f:
        json.dump(build(), f, indent=1, ensure_ascii=False)
        f.write("\n")
