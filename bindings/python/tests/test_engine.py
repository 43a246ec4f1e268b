"""The binding against the built library: each test names the property it proves."""

import _thread
import math
import os
import subprocess
import sys
import threading
import time

import pytest

import libinfer

PROMPT = "Once upon a time"
GREEDY = dict(temperature=0, ignore_eos=True)


def slow(seconds):
    """An on_token callback that holds the worker for `seconds` per token, so a long request is
    still running when the test acts on it, however fast the machine."""

    def cb(_event):
        time.sleep(seconds)

    return cb


# ---- generate ---------------------------------------------------------------------------------


def test_greedy_generate_is_deterministic_and_submit_result_gives_the_same_ids(engine):
    a = engine.generate(PROMPT, max_tokens=16, **GREEDY)
    b = engine.generate(PROMPT, max_tokens=16, **GREEDY)
    c = engine.submit(PROMPT, max_tokens=16, **GREEDY).result()
    assert len(a.ids) == 16 and a.finish_reason == "length" and a.status == "INFER_OK"
    assert a.ids == b.ids == c.ids
    assert all(0 <= t < engine.model_info().n_vocab for t in a.ids)


def test_text_is_the_detokenized_ids_and_a_token_prompt_equals_its_text(engine):
    a = engine.generate(PROMPT, max_tokens=16, **GREEDY)
    assert a.text == engine.detokenize(a.ids)
    by_ids = engine.generate(engine.tokenize(PROMPT), max_tokens=16, **GREEDY)
    assert by_ids.ids == a.ids and by_ids.text == a.text


def test_metrics_count_the_prompt_and_the_generated_tokens(engine):
    a = engine.generate(PROMPT, max_tokens=9, **GREEDY)
    m = a.metrics
    assert m.generated_tokens == 9
    assert m.prompt_tokens == len(engine.tokenize(PROMPT))
    assert 0 <= m.cached_tokens <= m.prompt_tokens
    assert m.e2e_ms >= m.ttft_ms >= 0 and m.queue_ms >= 0 and m.preemptions == 0


def test_greedy_ids_are_the_same_from_four_threads_at_once(engine):
    alone = engine.generate(PROMPT, max_tokens=24, **GREEDY).ids
    results = [None] * 4

    def run(i):
        results[i] = engine.generate(PROMPT, max_tokens=24, **GREEDY).ids

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [alone] * 4


def test_stop_string_ends_the_text_before_it(engine):
    full = engine.generate(PROMPT, max_tokens=24, **GREEDY)
    # Any two-character piece of the greedy text is a stop string the same request must hit.
    k = next((i for i in range(2, len(full.text) - 1) if "\ufffd" not in full.text[i : i + 2]), None)
    assert k is not None, f"no printable two-character piece in {full.text!r}"
    piece = full.text[k : k + 2]
    stopped = engine.generate(PROMPT, max_tokens=24, stop=[piece], **GREEDY)
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[: full.text.index(piece)]


# ---- stream -----------------------------------------------------------------------------------


def test_stream_pieces_concatenate_to_generate_text(engine):
    want = engine.generate(PROMPT, max_tokens=32, **GREEDY)
    s = engine.stream(PROMPT, max_tokens=32, **GREEDY)
    pieces = list(s)
    assert "".join(pieces) == want.text
    assert s.completion.ids == want.ids and s.completion.finish_reason == "length"


def test_on_token_sees_every_generated_id_then_a_final_event(engine):
    events = []
    done = engine.submit(PROMPT, max_tokens=12, on_token=events.append, **GREEDY).result()
    assert [e.token for e in events[:-1]] == done.ids
    assert events[-1].finished and events[-1].token == -1 and events[-1].finish_reason == "length"


# ---- cancel -----------------------------------------------------------------------------------


def test_handle_cancel_ends_a_long_request_cancelled(fresh_engine):
    started = threading.Event()

    def cb(_event):
        started.set()
        time.sleep(0.005)

    r = fresh_engine.submit(PROMPT, max_tokens=1500, on_token=cb, **GREEDY)
    assert started.wait(30)
    r.cancel()
    done = r.result()
    assert done.finish_reason == "cancelled" and done.status == "INFER_ERR_CANCELLED"
    assert 0 < len(done.ids) < 1500
    assert fresh_engine.stats().requests_cancelled == 1


def test_an_on_token_callback_returning_true_cancels(fresh_engine):
    seen = []

    def cb(event):
        seen.append(event.token)
        return len(seen) >= 3

    done = fresh_engine.submit(PROMPT, max_tokens=1500, on_token=cb, **GREEDY).result()
    assert done.finish_reason == "cancelled" and 3 <= len(done.ids) < 1500


def test_timeout_ms_ends_a_slow_request_at_its_deadline(fresh_engine):
    done = fresh_engine.generate(PROMPT, max_tokens=1500, timeout_ms=50, on_token=slow(0.01), **GREEDY)
    assert done.finish_reason == "deadline" and len(done.ids) < 1500


def test_an_exception_in_on_token_cancels_and_is_raised_by_result(engine):
    def bad(_event):
        raise ValueError("boom")

    r = engine.submit(PROMPT, max_tokens=200, on_token=bad, **GREEDY)
    with pytest.raises(ValueError, match="boom"):
        r.result()
    assert r._completion.finish_reason == "cancelled" and len(r._completion.ids) <= 2


def test_the_interpreter_exits_cleanly_with_requests_still_running(long_model_path):
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    code = (
        "import time, libinfer\n"
        f"e = libinfer.Engine({long_model_path!r}, threads=1)\n"
        "r = e.submit('hi', max_tokens=1500, ignore_eos=True, on_token=lambda ev: time.sleep(0.01))\n"
        "s = e.stream('ho', max_tokens=1500, ignore_eos=True)\n"
        "next(s)\n"
        "print('leaving')\n"
    )
    env = dict(os.environ, PYTHONPATH=src)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout == "leaving\n", run.stderr


def _assert_one_cancel_and_engine_usable(engine):
    st = engine.stats()
    assert st.requests_cancelled == 1
    assert st.running == 0 and st.waiting == 0
    after = engine.generate(PROMPT, max_tokens=5, **GREEDY)
    assert after.finish_reason == "length" and len(after.ids) == 5


def test_keyboard_interrupt_raised_in_the_stream_loop_cancels_the_request(fresh_engine):
    with pytest.raises(KeyboardInterrupt):
        for _piece in fresh_engine.stream(PROMPT, max_tokens=1500, on_token=slow(0.005), **GREEDY):
            raise KeyboardInterrupt
    _assert_one_cancel_and_engine_usable(fresh_engine)


def test_keyboard_interrupt_while_the_stream_waits_cancels_the_request(fresh_engine):
    # SIGINT-like delivery: the interrupt lands wherever the main thread is, mostly inside the
    # stream's blocking read.
    timer = threading.Timer(0.3, _thread.interrupt_main)
    try:
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            for _piece in fresh_engine.stream(PROMPT, max_tokens=1500, on_token=slow(0.02), **GREEDY):
                pass
    finally:
        timer.cancel()
    _assert_one_cancel_and_engine_usable(fresh_engine)


def test_leaving_a_stream_early_cancels_and_collects_it(fresh_engine):
    s = fresh_engine.stream(PROMPT, max_tokens=1500, on_token=slow(0.005), **GREEDY)
    for _piece in s:
        break
    s.close()
    assert s.completion.finish_reason == "cancelled"
    assert fresh_engine._lib.infer_engine_cancel(fresh_engine._handle, s.id) == 2  # collected: NOT_FOUND
    _assert_one_cancel_and_engine_usable(fresh_engine)


def test_a_stream_dropped_after_break_is_cancelled_and_collected(fresh_engine):
    ids = []
    for _piece in fresh_engine.stream(PROMPT, max_tokens=1500, on_token=lambda e: ids.append(e.id) or time.sleep(0.005), **GREEDY):
        break  # nothing else holds the stream: dropping it closes it
    assert fresh_engine._lib.infer_engine_cancel(fresh_engine._handle, ids[0]) == 2
    _assert_one_cancel_and_engine_usable(fresh_engine)


# ---- errors -----------------------------------------------------------------------------------


def test_a_missing_model_raises_with_the_library_message(library, tmp_path):
    missing = str(tmp_path / "no-such-model.gguf")
    with pytest.raises(libinfer.InferError) as e:
        libinfer.Engine(missing)
    assert e.value.status in ("INFER_ERR_NOT_FOUND", "INFER_ERR_IO")
    assert e.value.code in (2, 3)
    assert "no-such-model.gguf" in e.value.message
    assert e.value.message == library.infer_last_error().decode()


def test_a_bad_sampling_parameter_raises_naming_it(engine):
    with pytest.raises(libinfer.InferError) as e:
        engine.generate(PROMPT, temperature=-1)
    assert e.value.status == "INFER_ERR_INVALID_ARGUMENT" and "temperature" in e.value.message
    with pytest.raises(libinfer.InferError) as e:
        engine.generate(PROMPT, top_logprobs=21, logprobs=True)
    assert "top_logprobs" in str(e.value)


def test_bad_arguments_are_refused_before_the_library(engine, model_path):
    with pytest.raises(ValueError, match="kv_type"):
        libinfer.Engine(model_path, kv_type="f8")
    with pytest.raises(TypeError, match="unknown parameter"):
        engine.generate(PROMPT, temprature=0)
    with pytest.raises(TypeError):
        engine.generate(PROMPT, messages=[("user", "hi")])


def test_cpu_isa_names_the_level_the_kernels_run():
    assert libinfer.cpu_isa() in ("scalar", "avx2", "avxvnni", "avx512")


def test_device_names_a_cpu_or_cuda_device_and_a_missing_one_raises_unsupported(library, model_path):
    n = libinfer.cuda_device_count()
    assert n == library.infer_cuda_device_count() and n >= 0
    with pytest.raises(libinfer.InferError) as e:
        libinfer.Engine(model_path, device="gpu")
    assert e.value.status == "INFER_ERR_INVALID_ARGUMENT" and "device" in e.value.message
    with pytest.raises(TypeError, match="device"):
        libinfer.Engine(model_path, device=0)
    # Past the last GPU (every one where there is none): unsupported, naming the device.
    for device in [f"cuda:{n}"] + (["cuda"] if n == 0 else []):
        with pytest.raises(libinfer.InferError) as e:
            libinfer.Engine(model_path, device=device)
        assert e.value.status == "INFER_ERR_UNSUPPORTED" and device in e.value.message
    with libinfer.Engine(model_path, threads=1, device="cpu") as on_cpu:
        assert on_cpu.generate(PROMPT, max_tokens=4, temperature=0).ids


def test_a_token_outside_the_vocabulary_is_refused(engine):
    with pytest.raises(libinfer.InferError) as e:
        engine.generate([1, 10**6], max_tokens=2)
    assert e.value.status == "INFER_ERR_INVALID_ARGUMENT"


def test_a_closed_engine_refuses_calls(model_path):
    e = libinfer.Engine(model_path, threads=1)
    e.close()
    e.close()
    with pytest.raises(libinfer.InferError, match="closed"):
        e.generate(PROMPT)


def test_an_unloadable_library_raises_library_not_found_naming_it(library):
    with pytest.raises(libinfer.LibraryNotFound) as e:
        libinfer.load_library("/nonexistent/libinfer.so")
    assert "/nonexistent/libinfer.so" in str(e.value) and isinstance(e.value, OSError)
    assert libinfer.load_library() is library  # the loaded one stays


def test_import_works_without_the_library_and_engine_names_what_was_tried(model_path):
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    code = (
        "import libinfer\n"
        "try:\n"
        f"    libinfer.Engine({model_path!r})\n"
        "except libinfer.LibraryNotFound as e:\n"
        "    print('NOTFOUND', e)\n"
    )
    env = dict(os.environ, PYTHONPATH=src, LIBINFER_LIBRARY="/nonexistent/libinfer.so.0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("NOTFOUND") and "LIBINFER_LIBRARY=/nonexistent/libinfer.so.0" in out


# ---- stats, model info, text ------------------------------------------------------------------


def test_stats_count_generated_and_prompt_tokens_and_finished_requests(fresh_engine):
    n_prompt = len(fresh_engine.tokenize(PROMPT))
    fresh_engine.generate(PROMPT, max_tokens=7, **GREEDY)
    st = fresh_engine.stats()
    assert (st.generated_tokens, st.requests_finished, st.prompt_tokens) == (7, 1, n_prompt)
    fresh_engine.generate(PROMPT, max_tokens=5, **GREEDY)
    st = fresh_engine.stats()
    assert (st.generated_tokens, st.requests_finished, st.prompt_tokens) == (12, 2, 2 * n_prompt)
    assert st.requests_cancelled == 0 and st.requests_failed == 0 and st.uptime_s > 0
    assert st.e2e_ms.count == 2 and st.e2e_ms.p50 <= st.e2e_ms.p99


def test_model_info_describes_the_made_model(engine):
    info = engine.model_info()
    assert info.architecture == "llama"
    assert (info.n_vocab, info.n_embd, info.n_layer, info.n_head, info.n_head_kv) == (259, 64, 2, 4, 2)
    assert info.n_ctx_train == 256 and info.n_ctx == 256
    assert (info.bos, info.eos) == (1, 2) and info.size_bytes > 0


def test_tokenize_and_detokenize_follow_the_byte_vocabulary_also_through_the_size_retry(engine, monkeypatch):
    # The made model's vocabulary is SentencePiece byte fallback: id 3 + byte, after SentencePiece
    # escapes spaces (and a leading one) as U+2581, which byte tokens keep on the way back.
    text = "Héllo, wörld! " * 40
    escaped = "\u2581" + text.replace(" ", "\u2581")
    want = [3 + b for b in escaped.encode()]
    assert engine.tokenize(text, add_special=False) == want
    assert engine.tokenize(text) == [engine.model_info().bos] + want
    assert engine.detokenize(want) == escaped
    monkeypatch.setattr(libinfer._engine, "_guess", lambda n: 0)  # the first call is always too small
    assert engine.tokenize(text, add_special=False) == want
    assert engine.detokenize(want) == escaped
    assert engine.detokenize([]) == ""


def test_every_knob_is_accepted_and_max_context_bounds_a_sequence(model_path):
    progress = []
    with libinfer.Engine(
        model_path,
        threads=1,
        max_batch_tokens=64,
        max_sequences=4,
        max_waiting=8,
        batch_wait_ms=0.0,
        kv_cache_bytes=1 << 20,
        kv_cache_tokens=512,
        block_size=32,
        kv_type="f32",
        weight_type="q8_0",
        max_context=96,
        prefix_cache=False,
        priority_preemption=True,
        price_per_hour=1.5,
        metrics_window=10,
        chat_template="chatml",
        on_load_progress=progress.append,
    ) as e:
        assert progress and progress[-1] == 1.0 and progress == sorted(progress)
        assert e.model_info().n_ctx == 96
        n_prompt = len(e.tokenize(PROMPT))
        done = e.generate(PROMPT, max_tokens=-1, **GREEDY)
        assert done.finish_reason == "context" and n_prompt + len(done.ids) == 96


# ---- chat -------------------------------------------------------------------------------------

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
CHATML = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"


def test_chatml_by_name_renders_the_chatml_format(model_path):
    assert "chatml" in libinfer.chat_template_names()
    with libinfer.Engine(model_path, threads=2, chat_template="chatml") as e:
        assert e.model_info().chat_template == "chatml"
        assert e.apply_chat_template(MESSAGES) == CHATML + "<|im_start|>assistant\n"
        assert e.apply_chat_template(MESSAGES, add_generation_prompt=False) == CHATML
        assert e.apply_chat_template([(m["role"], m["content"]) for m in MESSAGES]) == e.apply_chat_template(MESSAGES)


def test_chat_generates_from_the_rendered_conversation(model_path):
    with libinfer.Engine(model_path, threads=2, chat_template="chatml") as e:
        done = e.chat(MESSAGES, max_tokens=12, temperature=0)
        assert done.finish_reason in ("length", "stop") and done.metrics.generated_tokens == len(done.ids)
        same = e.generate(e.apply_chat_template(MESSAGES), max_tokens=12, temperature=0, stop=["<|im_end|>"])
        assert same.ids == done.ids and same.text == done.text
        assert "".join(e.stream_chat(MESSAGES, max_tokens=12, temperature=0)) == done.text


def test_chat_without_a_template_is_not_found_and_an_unknown_name_is_refused(engine, model_path):
    with pytest.raises(libinfer.InferError) as e:
        engine.chat(MESSAGES, max_tokens=2)
    assert e.value.status == "INFER_ERR_NOT_FOUND"
    with pytest.raises(libinfer.InferError) as e:
        libinfer.Engine(model_path, chat_template="no-such-format")
    assert e.value.status == "INFER_ERR_INVALID_ARGUMENT"


def test_a_jinja_template_renders_as_jinja2_renders_it_with_tools_and_keywords(model_path):
    """chat_template_text, chat_template_variables and apply_chat_template(**variables) against
    Python's jinja2 in transformers' configuration (tests/integration/jinja_reference.py)."""
    pytest.importorskip("jinja2")
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    sys.path.insert(0, os.path.join(root, "tests", "integration"))
    import jinja_reference

    with open(os.path.join(root, "tests", "data", "chat_templates", "Qwen-Qwen3-0.6B.jinja"), encoding="utf-8") as f:
        template = f.read()
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "2 + 3?"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
                {"role": "tool", "content": "5"}]
    reference = jinja_reference.reference_environment().from_string(template)
    with libinfer.Engine(model_path, threads=2, chat_template_text=template,
                         chat_template_variables={"enable_thinking": False}) as e:
        assert e.model_info().chat_template == "jinja"
        got = e.apply_chat_template(messages, tools=tools)
        assert got == reference.render(messages=messages, tools=tools, documents=None, add_generation_prompt=True,
                                       bos_token="<s>", eos_token="</s>", enable_thinking=False)
        pairs = [("user", "Hi")]
        assert e.apply_chat_template(pairs) == reference.render(
            messages=[{"role": "user", "content": "Hi"}], tools=None, documents=None, add_generation_prompt=True,
            bos_token="<s>", eos_token="</s>", enable_thinking=False)
    with pytest.raises(libinfer.InferError) as err:
        libinfer.Engine(model_path, chat_template_text="{% if %}")
    assert err.value.status == "INFER_ERR_INVALID_ARGUMENT"


# ---- logprobs ---------------------------------------------------------------------------------


def test_logprobs_are_nonpositive_with_sorted_alternatives_led_by_the_greedy_token(engine):
    done = engine.generate(PROMPT, max_tokens=10, logprobs=True, top_logprobs=5, **GREEDY)
    assert len(done.logprobs) == len(done.ids) == 10
    for lp, tok in zip(done.logprobs, done.ids):
        assert lp.token == tok and lp.logprob <= 0
        assert len(lp.top) == 5
        values = [v for _t, v in lp.top]
        assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
        assert lp.top[0][0] == tok and lp.top[0][1] == pytest.approx(lp.logprob)
    assert engine.generate(PROMPT, max_tokens=3, **GREEDY).logprobs is None


def test_prompt_logprobs_equal_the_log_softmax_of_the_prompt_logits(engine):
    ids = engine.tokenize(PROMPT)
    done = engine.generate(ids, max_tokens=1, prompt_logprobs_from=1, prompt_logits=True, **GREEDY)
    assert [lp.token for lp in done.prompt_logprobs] == ids[1:]
    assert len(done.prompt_logits) == len(ids) - 1
    for lp, row in zip(done.prompt_logprobs, done.prompt_logits):
        assert len(row) == 259
        top = max(row)
        log_z = top + math.log(sum(math.exp(x - top) for x in row))
        assert lp.logprob == pytest.approx(row[lp.token] - log_z, abs=1e-3)
