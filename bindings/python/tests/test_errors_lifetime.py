"""Errors surface as VegasError with the library's status and message; objects can be
closed or dropped in any order without a crash or a leak."""
import gc
import os
import subprocess
import sys

import pytest

import vegas


def test_missing_model_dir_is_an_io_error_naming_it():
    with pytest.raises(vegas.VegasError) as err:
        vegas.Model("/nonexistent/model", backend="cpu")
    assert err.value.status == vegas.Status.IO
    assert "/nonexistent/model" in err.value.message
    assert "VEGAS_ERR_IO" in str(err.value)


def test_bad_arguments_carry_the_library_message(model):
    with pytest.raises(vegas.VegasError) as err:
        model.tokenizer.decode([10 ** 6])
    assert err.value.status == vegas.Status.TOKEN_OUT_OF_RANGE and err.value.message
    with pytest.raises(vegas.VegasError) as err:
        model.session(mode="vegas", policy="no-such-policy")
    assert err.value.status == vegas.Status.UNSUPPORTED
    assert "no-such-policy" in err.value.message
    with pytest.raises(vegas.VegasError) as err:
        model.tokenizer.token_id("<|not a token|>")
    assert err.value.status == vegas.Status.NOT_FOUND
    with pytest.raises(ValueError):
        model.session(mode="sideways")
    with pytest.raises(TypeError):
        model.session(no_such_option=1)


def test_progress_callback_can_cancel_the_load(model_dir):
    with pytest.raises(vegas.VegasError) as err:
        vegas.Model(model_dir, backend="cpu", progress=lambda fraction: True)
    assert err.value.status == vegas.Status.CANCELLED


def test_session_outlives_a_closed_model(model_dir):
    m = vegas.Model(model_dir, backend="cpu")
    tokenizer = m.tokenizer
    s = m.session(kv_bytes=8 << 20)
    m.close()
    m.close()  # twice is fine
    with pytest.raises(ValueError):
        tokenizer.encode("x")  # borrowed from the closed model
    done = s.generate([331, 290], max_tokens=4, ignore_eos=True)  # ids: no tokenizer needed
    assert len(done.tokens) == 4
    s.close()
    with pytest.raises(ValueError):
        s.step()


def test_close_inside_a_callback_is_refused(model):
    errors = []

    def close_now(token):
        try:
            s.close()
        except RuntimeError as e:
            errors.append(e)
        return True

    with model.session() as s:
        done = s.generate("def f():", max_tokens=8, on_token=close_now)
        assert done.info.finish_reason == vegas.FinishReason.CALLBACK
        with pytest.raises(vegas.VegasError) as err:
            s.submit("x", on_token=lambda t: s.step())
            s.run()
        assert err.value.status == vegas.Status.WRONG_STATE
    assert errors and "while the session is running" in str(errors[0])


# Each drop order runs in a child interpreter so that a crash there fails this test.
# close() frees at once; del leaves it to reference counting and the garbage collector.
DROP_ORDERS = {
    "close_model_first": "m.close(); s.run(); s.close(); det.close()",
    "close_session_first": "s.close(); det.push(5); m.close(); det.close()",
    "close_detokenizer_last": "m.close(); s.close(); det.close(); tok.close()",
    "del_model_first": "del m; gc.collect(); s.run(); del s; del tok, det",
    "del_session_first": "del s; gc.collect(); del m, tok, det",
    "left_to_exit": "pass",  # everything still referenced when the interpreter exits
}


@pytest.mark.parametrize("order", sorted(DROP_ORDERS))
def test_drop_in_any_order_does_not_crash(model_dir, order):
    script = f"""
import gc, vegas
m = vegas.Model({str(model_dir)!r}, backend="cpu")
tok = m.tokenizer
det = tok.detokenizer()
s = m.session(kv_bytes=8 << 20)
seq = s.submit("def f():", max_tokens=4, on_token=lambda t: None)
s.step()
{DROP_ORDERS[order]}
gc.collect()
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert "Exception ignored" not in out.stderr, out.stderr  # e.g. a failing __del__


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_repeated_create_and_drop_does_not_leak(model_dir):
    def cycle():
        m = vegas.Model(model_dir, backend="cpu")
        s = m.session(kv_bytes=8 << 20)
        list(s.stream("x = ", max_tokens=2, ignore_eos=True))
        det = m.tokenizer.detokenizer()
        det.push(5)
        m.close()  # model first, session after; the model's close frees the detokenizer
        s.close()
        gc.collect()
    for _ in range(5):
        cycle()
    before = rss_bytes()
    for _ in range(30):
        cycle()
    grown = rss_bytes() - before
    assert grown < 16 << 20, f"RSS grew {grown / 2**20:.1f} MiB over 30 load/free cycles"
