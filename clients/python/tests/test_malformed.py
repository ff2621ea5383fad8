"""Malformed and hostile artifacts: each gets its code, the same as the C
verifier's, and when several faults meet, the first check in the order of
canonical-hash.md section 5 decides."""

import json
import os
import struct
import unittest
from unittest import mock

from helpers import TempDirTest, default_tensors, write_artifact, write_header

from lensemble_verify_client import load_verified

W = "weights.safetensors"


def _header(d):
    with open(os.path.join(d, "header.json"), "rb") as f:
        return json.loads(f.read())


def _edit_header(d, fn):
    h = _header(d)
    fn(h)
    write_header(d, h)


def _raw_header(d, text):
    write_header(d, None, text.encode("utf-8") if isinstance(text, str) else text)


def _header_text(d):
    with open(os.path.join(d, "header.json"), encoding="utf-8") as f:
        return f.read()


def _sub_header(d, old, new):
    t = _header_text(d)
    assert old in t, (old, t)
    _raw_header(d, t.replace(old, new, 1))


def _weights(d, name=W):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def _put(d, data, name=W):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def _st_parts(d, name=W):
    raw = _weights(d, name)
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _st_put(d, hdr, data, name=W, text=None):
    js = text.encode("utf-8") if text is not None else json.dumps(hdr).encode("utf-8")
    _put(d, struct.pack("<Q", len(js)) + js + data, name)


def _st_edit(d, fn, name=W):
    hdr, data = _st_parts(d, name)
    data = fn(hdr, data) or data
    _st_put(d, hdr, data, name)


def _rehash(d):
    """Recompute header.content_hash for what the files now hold (an
    attacker with write access to the store can)."""
    from helpers import canonical_hash
    h = _header(d)
    tensors = []
    for fname in h["weight_files"]:
        hdr, data = _st_parts(d, fname)
        for k, v in hdr.items():
            if k != "__metadata__":
                b, e = v["data_offsets"]
                tensors.append((k, v["dtype"], tuple(v["shape"]), data[b:e]))
    h["content_hash"] = canonical_hash(h, tensors)
    write_header(d, h)
    return h["content_hash"]


# (name, code, mutation of a fresh default artifact in directory d)
CASES = []


def case(code, name=None):
    def add(fn):
        CASES.append((name or fn.__name__, code, fn))
        return fn
    return add


# ---- safetensors structure ------------------------------------------------

@case("checkpoint_integrity")
def truncated_safetensors(d):
    _put(d, _weights(d)[:-3])


@case("checkpoint_integrity")
def truncated_inside_header(d):
    _put(d, _weights(d)[:40])


@case("checkpoint_integrity")
def header_length_past_eof(d):
    raw = _weights(d)
    _put(d, struct.pack("<Q", len(raw)) + raw[8:])


@case("checkpoint_integrity")
def header_length_huge(d):
    raw = _weights(d)
    _put(d, struct.pack("<Q", 1 << 62) + raw[8:])


@case("checkpoint_integrity")
def shorter_than_8_bytes(d):
    _put(d, b"\x02\x00\x00")


@case("checkpoint_integrity")
def empty_weight_file(d):
    _put(d, b"")


@case("checkpoint_integrity")
def header_length_one(d):
    _put(d, struct.pack("<Q", 1) + b"{")


@case("checkpoint_integrity")
def header_starts_with_space(d):
    hdr, data = _st_parts(d)
    _st_put(d, None, data, text=" " + json.dumps(hdr))


@case("checkpoint_integrity")
def overlapping_ranges(d):
    def f(hdr, data):
        hdr["encoder.a"]["data_offsets"] = [0, 24]
        hdr["encoder.b"]["data_offsets"] = [16, 24]
    _st_edit(d, f)


@case("checkpoint_integrity")
def hole_between_ranges(d):
    def f(hdr, data):
        for v in hdr.values():
            b, e = v["data_offsets"]
            if b > 0:
                v["data_offsets"] = [b + 4, e + 4]
        return data[:24] + b"\0\0\0\0" + data[24:]
    _st_edit(d, f)


@case("checkpoint_integrity")
def trailing_bytes(d):
    _put(d, _weights(d) + b"\0\0\0\0")


@case("checkpoint_integrity")
def size_disagrees_with_shape(d):
    _st_edit(d, lambda hdr, data: hdr["encoder.a"].update(shape=[3, 3]))


@case("checkpoint_integrity")
def shape_size_overflows(d):
    _st_edit(d, lambda hdr, data: hdr["predictor.e"].update(shape=[1 << 62, 8, 0]))


@case("checkpoint_integrity")
def offsets_end_before_begin(d):
    _st_edit(d, lambda hdr, data: hdr["encoder.a"].update(data_offsets=[24, 0]))


@case("checkpoint_integrity")
def offset_negative_zero(d):
    hdr, data = _st_parts(d)
    _st_put(d, None, data, text=json.dumps(hdr).replace("[0, 24]", "[-0, 24]", 1))


@case("checkpoint_integrity")
def shape_negative_zero(d):
    hdr, data = _st_parts(d)
    _st_put(d, None, data, text=json.dumps(hdr).replace("[0, 3]", "[-0, 3]", 1))


@case("checkpoint_integrity")
def offsets_not_integers(d):
    _st_edit(d, lambda hdr, data: hdr["encoder.a"].update(data_offsets=[0.0, 24]))


@case("checkpoint_integrity")
def rank_above_64(d):
    _st_edit(d, lambda hdr, data: hdr["predictor.e"].update(shape=[1] * 64 + [0]))


@case("checkpoint_integrity")
def duplicate_tensor_key(d):
    hdr, data = _st_parts(d)
    text = json.dumps(hdr)
    dup = '"encoder.a": ' + json.dumps(hdr["encoder.a"])
    _st_put(d, None, data, text=text[:-1] + ", " + dup + "}")


@case("checkpoint_integrity")
def metadata_not_strings(d):
    _st_edit(d, lambda hdr, data: hdr.update(__metadata__={"format": 1}))


@case("ok")
def metadata_strings(d):
    _st_edit(d, lambda hdr, data: hdr.update(__metadata__={"format": "pt"}))


@case("checkpoint_integrity")
def unknown_tensor_field(d):
    _st_edit(d, lambda hdr, data: hdr["encoder.a"].update(extra=1))


@case("checkpoint_integrity")
def unknown_dtype(d):
    _st_edit(d, lambda hdr, data: hdr["encoder.a"].update(dtype="F128"))


@case("checkpoint_integrity")
def nan_in_safetensors_header(d):
    hdr, data = _st_parts(d)
    _st_put(d, None, data, text=json.dumps(hdr)[:-1] + ', "__metadata__": {"a": NaN}}')


@case("checkpoint_integrity")
def pickle_instead(d):
    _put(d, b"\x80\x04\x95" + b"\0" * 64)


@case("ok")
def padded_header_any_order(d):
    hdr, data = _st_parts(d)
    items = list(hdr.items())[::-1]
    _st_put(d, None, data, text=json.dumps(dict(items)) + "        ")


# ---- dtypes, residency, groups --------------------------------------------

@case("artifact_invalid")
def bad_dtype_f64(d):
    tensors = default_tensors()
    tensors[0] = ("encoder.a", "F64", (3,), struct.pack("<3d", 1, 2, 3))
    write_artifact(d, tensors)


@case("artifact_invalid")
def bad_dtype_i32(d):
    tensors = default_tensors()
    tensors[0] = ("encoder.a", "I32", (3,), struct.pack("<3i", 1, 2, 3))
    write_artifact(d, tensors)


@case("residency_violation")
def action_head_tensor(d):
    tensors = default_tensors() + [("action_head.w", "F32", (1,), b"\0\0\0\0")]
    write_artifact(d, tensors, header={"param_groups": ["encoder", "predictor"]})


@case("residency_violation")
def action_head_group(d):
    write_artifact(d, header={"param_groups": ["encoder", "predictor", "action_head"]})


@case("artifact_invalid")
def group_not_listed(d):
    write_artifact(d, header={"param_groups": ["encoder"]})


@case("residency_violation")
def tensor_without_group_dot(d):
    tensors = default_tensors() + [("encoderx", "F32", (1,), b"\0\0\0\0")]
    write_artifact(d, tensors, header={"param_groups": ["encoder", "predictor"]})


# ---- weight files ------------------------------------------------------------

@case("artifact_invalid")
def symlinked_weight_file(d):
    os.rename(os.path.join(d, W), os.path.join(d, "real.safetensors"))
    os.symlink("real.safetensors", os.path.join(d, W))


@case("artifact_invalid")
def symlinked_weight_file_outside(d):
    os.rename(os.path.join(d, W), os.path.join(d, "..", "outside.safetensors"))
    os.symlink(os.path.join("..", "outside.safetensors"), os.path.join(d, W))


@case("artifact_invalid")
def weight_file_name_with_slash(d):
    os.mkdir(os.path.join(d, "sub"))
    os.rename(os.path.join(d, W), os.path.join(d, "sub", W))
    _edit_header(d, lambda h: h.update(weight_files=["sub/" + W]))


@case("artifact_invalid")
def weight_file_absolute(d):
    _edit_header(d, lambda h: h.update(weight_files=[os.path.join(d, W)]))


@case("artifact_invalid")
def weight_file_dotdot(d):
    _edit_header(d, lambda h: h.update(weight_files=[".."]))


@case("artifact_invalid")
def weight_file_nul(d):
    _edit_header(d, lambda h: h.update(weight_files=[W + "\0x"]))


@case("artifact_invalid")
def weight_file_empty_name(d):
    _edit_header(d, lambda h: h.update(weight_files=[""]))


@case("artifact_invalid")
def weight_files_empty(d):
    _edit_header(d, lambda h: h.update(weight_files=[]))


@case("artifact_invalid")
def weight_file_twice(d):
    _edit_header(d, lambda h: h.update(weight_files=[W, W]))


@case("artifact_invalid")
def weight_file_is_a_directory(d):
    os.unlink(os.path.join(d, W))
    os.mkdir(os.path.join(d, W))


@case("artifact_invalid")
def weight_file_is_a_fifo(d):
    os.unlink(os.path.join(d, W))
    os.mkfifo(os.path.join(d, W))


@case("checkpoint_integrity")
def weight_file_missing(d):
    os.unlink(os.path.join(d, W))


@case("checkpoint_integrity")
def tensor_in_two_shards(d):
    write_artifact(d, shards=[["encoder.a", "encoder.b"], ["predictor.c", "predictor.d",
                                                           "predictor.e", "encoder.a"]])


# ---- header.json -----------------------------------------------------------

@case("artifact_invalid")
def header_missing(d):
    os.unlink(os.path.join(d, "header.json"))


@case("artifact_invalid")
def header_symlink(d):
    os.rename(os.path.join(d, "header.json"), os.path.join(d, "h.json"))
    os.symlink("h.json", os.path.join(d, "header.json"))


@case("artifact_invalid")
def header_too_large(d):
    with open(os.path.join(d, "header.json"), "r+b") as f:
        f.truncate(16 * 1024 * 1024 + 1)


@case("artifact_invalid")
def header_duplicate_key(d):
    _sub_header(d, '"round_index": 0', '"round_index": 0, "round_index": 1')


@case("artifact_invalid")
def header_duplicate_key_nested(d):
    _sub_header(d, '"model_arch": null', '"model_arch": {"a": 1, "a": 2}')


@case("artifact_invalid")
def header_duplicate_key_with_bad_version(d):
    # JSON validity is checked before the schema_version gate.
    _sub_header(d, '"schema_version": 2', '"schema_version": 999, "schema_version": 2')


@case("artifact_invalid")
def header_nan(d):
    _sub_header(d, '"model_arch": null', '"model_arch": {"x": NaN}')


@case("artifact_invalid")
def header_infinity(d):
    _sub_header(d, '"model_arch": null', '"model_arch": {"x": -Infinity}')


@case("artifact_invalid")
def header_lone_surrogate(d):
    _sub_header(d, '"config_hash": "cfg"', '"config_hash": "\\ud800x"')


@case("artifact_invalid")
def header_reversed_surrogates(d):
    _sub_header(d, '"config_hash": "cfg"', '"config_hash": "\\udc00\\ud800"')


@case("ok")
def header_surrogate_pair(d):
    _sub_header(d, '"config_hash": "cfg"', '"config_hash": "\\ud83d\\ude00"')


@case("artifact_invalid")
def header_invalid_utf8(d):
    _raw_header(d, _header_text(d).encode("utf-8").replace(b'"cfg"', b'"c\xc3\x28"'))


@case("artifact_invalid")
def header_overlong_utf8(d):
    _raw_header(d, _header_text(d).encode("utf-8").replace(b'"cfg"', b'"\xc0\xaf"'))


@case("artifact_invalid")
def header_bom(d):
    _raw_header(d, b"\xef\xbb\xbf" + _header_text(d).encode("utf-8"))


@case("artifact_invalid")
def header_control_character(d):
    _sub_header(d, '"config_hash": "cfg"', '"config_hash": "c\tfg"')


@case("artifact_invalid")
def header_trailing_garbage(d):
    _raw_header(d, _header_text(d) + " x")


@case("ok")
def header_trailing_whitespace(d):
    _raw_header(d, "\r\n\t " + _header_text(d) + "\n\n ")


@case("artifact_invalid")
def header_not_json(d):
    _raw_header(d, "schema_version: 2")


@case("artifact_invalid")
def header_empty(d):
    _raw_header(d, "")


@case("artifact_invalid")
def header_not_an_object(d):
    _raw_header(d, "[" + _header_text(d) + "]")


@case("artifact_invalid")
def header_leading_zero(d):
    _sub_header(d, '"round_index": 0', '"round_index": 00')


@case("ok")
def header_nesting_64(d):
    _sub_header(d, '"model_arch": null', '"model_arch": ' + '{"a":' * 62 + "[1]" + "}" * 62)


@case("artifact_invalid")
def header_nesting_65(d):
    _sub_header(d, '"model_arch": null', '"model_arch": ' + '{"a":' * 63 + "[1]" + "}" * 63)


@case("artifact_invalid")
def header_nesting_10000(d):
    _sub_header(d, '"model_arch": null', '"model_arch": ' + "[" * 10000 + "]" * 10000)


@case("schema_version_mismatch")
def schema_missing(d):
    _edit_header(d, lambda h: h.pop("schema_version"))


@case("schema_version_mismatch")
def schema_bool(d):
    _edit_header(d, lambda h: h.update(schema_version=True))


@case("schema_version_mismatch")
def schema_string(d):
    _edit_header(d, lambda h: h.update(schema_version="2"))


@case("schema_version_mismatch")
def schema_float(d):
    _sub_header(d, '"schema_version": 2', '"schema_version": 2.0')


@case("schema_version_mismatch")
def schema_exponent(d):
    _sub_header(d, '"schema_version": 2', '"schema_version": 2e0')


@case("schema_version_mismatch")
def schema_zero(d):
    _edit_header(d, lambda h: h.update(schema_version=0))


@case("schema_version_mismatch")
def schema_negative_zero(d):
    _sub_header(d, '"schema_version": 2', '"schema_version": -0')


@case("schema_version_mismatch")
def schema_three(d):
    _edit_header(d, lambda h: h.update(schema_version=3))


@case("schema_version_mismatch")
def schema_beyond_int64(d):
    _sub_header(d, '"schema_version": 2', '"schema_version": 9223372036854775808')


@case("schema_version_mismatch")
def schema_5000_digits(d):
    _sub_header(d, '"schema_version": 2', '"schema_version": ' + "9" * 5000)


@case("schema_version_mismatch")
def schema_gate_before_fields(d):
    _edit_header(d, lambda h: h.update(schema_version=7, bogus=1, round_index="x"))


@case("artifact_invalid")
def unknown_field(d):
    _edit_header(d, lambda h: h.update(extra=None))


@case("artifact_invalid")
def model_arch_in_v1(d):
    write_artifact(d, schema_version=1, header={"model_arch": None})


@case("ok")
def schema_v1(d):
    write_artifact(d, schema_version=1)


@case("artifact_invalid")
def model_arch_not_object(d):
    _edit_header(d, lambda h: h.update(model_arch=[1]))


@case("ok")
def model_arch_absent(d):
    _edit_header(d, lambda h: h.pop("model_arch"))


@case("artifact_invalid")
def created_at_missing(d):
    _edit_header(d, lambda h: h.pop("created_at"))


@case("artifact_invalid")
def created_at_feb_30(d):
    _edit_header(d, lambda h: h.update(created_at="2026-02-30T00:00:00Z"))


@case("artifact_invalid")
def created_at_not_utc(d):
    _edit_header(d, lambda h: h.update(created_at="2026-06-02T12:00:00+01:00"))


@case("artifact_invalid")
def created_at_empty_fraction(d):
    _edit_header(d, lambda h: h.update(created_at="2026-06-02T12:00:00.Z"))


@case("ok")
def created_at_fraction_offset_leap(d):
    _edit_header(d, lambda h: h.update(created_at="2024-02-29t23:59:60.000001+00:00"))


@case("artifact_invalid")
def content_hash_uppercase(d):
    _edit_header(d, lambda h: h.update(content_hash=h["content_hash"].upper()))


@case("artifact_invalid")
def parent_hash_short(d):
    _edit_header(d, lambda h: h.update(parent_hash="ab" * 31))


@case("artifact_invalid")
def round_index_negative(d):
    _edit_header(d, lambda h: h.update(round_index=-1))


@case("artifact_invalid")
def round_index_bool(d):
    _edit_header(d, lambda h: h.update(round_index=False))


@case("artifact_invalid")
def round_index_float(d):
    _sub_header(d, '"round_index": 0', '"round_index": 0.0')


@case("ok")
def round_index_negative_zero(d):
    _sub_header(d, '"round_index": 0', '"round_index": -0')


@case("artifact_invalid")
def param_groups_not_strings(d):
    _edit_header(d, lambda h: h.update(param_groups=["encoder", 1]))


@case("artifact_invalid")
def wmcp_version_not_string(d):
    _edit_header(d, lambda h: h.update(wmcp_version=1))


@case("artifact_invalid")
def manifest_shape_negative_zero(d):
    _sub_header(d, "\"shape\": [\n        0,", "\"shape\": [\n        -0,")


@case("artifact_invalid")
def manifest_unknown_field(d):
    _edit_header(d, lambda h: h["tensor_manifest"][0].update(size=24))


@case("artifact_invalid")
def manifest_missing_dtype(d):
    _edit_header(d, lambda h: h["tensor_manifest"][0].pop("dtype"))


@case("artifact_invalid")
def manifest_entry_not_object(d):
    _edit_header(d, lambda h: h["tensor_manifest"].append("x"))


# ---- manifest and index agreement --------------------------------------------

@case("checkpoint_integrity")
def manifest_out_of_order(d):
    _edit_header(d, lambda h: h["tensor_manifest"].reverse())


@case("checkpoint_integrity")
def manifest_wrong_dtype(d):
    _edit_header(d, lambda h: h["tensor_manifest"][0].update(dtype="float16"))


@case("checkpoint_integrity")
def manifest_wrong_shape(d):
    _edit_header(d, lambda h: h["tensor_manifest"][0].update(shape=[3, 2]))


@case("checkpoint_integrity")
def manifest_wrong_group(d):
    _edit_header(d, lambda h: h["tensor_manifest"][0].update(group="predictor"))


@case("checkpoint_integrity")
def manifest_missing_tensor(d):
    _edit_header(d, lambda h: h["tensor_manifest"].pop())


@case("ok")
def index_agrees(d):
    write_artifact(d, shards=[["encoder.a", "encoder.b"], ["predictor.c", "predictor.d",
                                                           "predictor.e"]], index=True)


def _sharded_index(d, fn):
    write_artifact(d, shards=[["encoder.a", "encoder.b"], ["predictor.c", "predictor.d",
                                                           "predictor.e"]], index=True)
    p = os.path.join(d, "weights.index.json")
    with open(p) as f:
        idx = json.load(f)
    fn(idx)
    with open(p, "w") as f:
        f.write(idx if isinstance(idx, str) else json.dumps(idx))


@case("checkpoint_integrity")
def index_names_wrong_shard(d):
    _sharded_index(d, lambda i: i["weight_map"].update({"encoder.a": "weights-00001-of-00002"
                                                                     ".safetensors"}))


@case("checkpoint_integrity")
def index_misses_a_tensor(d):
    _sharded_index(d, lambda i: i["weight_map"].pop("encoder.a"))


@case("checkpoint_integrity")
def index_extra_tensor(d):
    _sharded_index(d, lambda i: i["weight_map"].update({"encoder.zz": "weights-00000-of-00002"
                                                                      ".safetensors"}))


@case("checkpoint_integrity")
def index_unknown_field(d):
    _sharded_index(d, lambda i: i.update(extra=1))


@case("checkpoint_integrity")
def index_not_json(d):
    write_artifact(d, index=True)
    with open(os.path.join(d, "weights.index.json"), "w") as f:
        f.write("{")


@case("artifact_invalid")
def index_symlink(d):
    write_artifact(d, index=True)
    os.rename(os.path.join(d, "weights.index.json"), os.path.join(d, "i.json"))
    os.symlink("i.json", os.path.join(d, "weights.index.json"))


# ---- the hash ---------------------------------------------------------------

@case("checkpoint_integrity")
def weight_byte_flipped(d):
    raw = bytearray(_weights(d))
    raw[-20] ^= 1
    _put(d, bytes(raw))


@case("checkpoint_integrity")
def header_hash_edited(d):
    _edit_header(d, lambda h: h.update(content_hash="a" * 64))


@case("checkpoint_integrity")
def frame_field_edited(d):
    _edit_header(d, lambda h: h.update(wmcp_version="wmcp-1.0.1"))


@case("ok")
def unhashed_fields_edited(d):
    _edit_header(d, lambda h: h.update(config_hash="other", created_at="2030-01-01T00:00:00Z",
                                       model_arch={"depth": 12}))


@case("ok")
def frame_escapes(d):
    write_artifact(d, header={"wmcp_version": 'w\u00e9\u2028\U0001f600"\\\n\r\t\b\f\x01\x7f/',
                              "parent_hash": "ab" * 32, "round_index": 9})


@case("ok")
def unicode_tensor_names(d):
    f = struct.pack("<f", 1)
    write_artifact(d, [("encoder.\u00e9", "F32", (1,), f), ("encoder.z", "F32", (1,), f),
                       ("encoder.\U0001f600", "F32", (1,), f), ("encoder.Z", "F32", (1,), f),
                       ("predictor.\x00", "F32", (1,), f)])


# ---- several faults: the first check decides -----------------------------------

@case("artifact_invalid")
def order_symlink_before_structure(d):
    write_artifact(d, shards=[["encoder.a", "encoder.b"], ["predictor.c", "predictor.d",
                                                           "predictor.e"]])
    _put(d, b"junk", "weights-00000-of-00002.safetensors")
    p = os.path.join(d, "weights-00001-of-00002.safetensors")
    os.rename(p, p + ".real")
    os.symlink(os.path.basename(p) + ".real", p)


@case("checkpoint_integrity")
def order_structure_before_dtype(d):
    tensors = default_tensors()
    tensors[0] = ("encoder.a", "F64", (3,), struct.pack("<3d", 1, 2, 3))
    write_artifact(d, tensors, shards=[["encoder.a"], ["encoder.b", "predictor.c",
                                                       "predictor.d", "predictor.e"]])
    _put(d, b"junk", "weights-00001-of-00002.safetensors")


@case("artifact_invalid")
def order_dtype_before_residency(d):
    tensors = default_tensors() + [("action_head.w", "F64", (1,), b"\0" * 8)]
    write_artifact(d, tensors)


@case("residency_violation")
def order_residency_before_groups(d):
    tensors = default_tensors() + [("action_head.w", "F32", (1,), b"\0" * 4)]
    write_artifact(d, tensors, header={"param_groups": ["encoder"]})


@case("artifact_invalid")
def order_groups_before_shards(d):
    write_artifact(d, shards=[["encoder.a", "encoder.b"], ["predictor.c", "predictor.d",
                                                           "predictor.e", "encoder.a"]],
                   header={"param_groups": ["encoder"]})


@case("checkpoint_integrity")
def order_manifest_before_hash(d):
    _edit_header(d, lambda h: (h["tensor_manifest"].pop(), h.update(content_hash="b" * 64)))


@case("artifact_invalid")
def order_header_before_weights(d):
    _put(d, b"junk")
    _edit_header(d, lambda h: h.update(extra=1))


class Malformed(TempDirTest):
    """One test per case in CASES (added below)."""

    def run_case(self, code, mutate):
        d = os.path.join(self.tmp, "art")
        write_artifact(d)
        mutate(d)
        self.agree(d, code)


def _add(name, code, fn):
    def test(self):
        self.run_case(code, fn)
    test.__doc__ = "%s: %s" % (name, code)
    setattr(Malformed, "test_" + name, test)


for _c in CASES:
    _add(*_c)


class Directory(TempDirTest):
    def test_missing_directory(self):
        self.agree(os.path.join(self.tmp, "nope"), "artifact_invalid")

    def test_a_file_not_a_directory(self):
        p = os.path.join(self.tmp, "f")
        open(p, "w").close()
        self.agree(p, "artifact_invalid")


class Tampering(TempDirTest):
    """What expect= adds to integrity: an attacker who rewrites the files
    coherently (weights and header hash) passes the integrity check, not a
    known hash."""

    def setUp(self):
        super().setUp()
        self.d = os.path.join(self.tmp, "art")
        _, self.committed = write_artifact(self.d)

    def test_consistent_rewrite_caught_by_expect(self):
        raw = bytearray(_weights(self.d))
        raw[-30] ^= 0x40
        _put(self.d, bytes(raw))
        forged = _rehash(self.d)
        self.assertNotEqual(forged, self.committed)
        self.agree(self.d, "ok")                       # integrity alone: fooled
        got = self.agree(self.d, "checkpoint_integrity", expect=self.committed)
        self.assertIn(self.committed, got[1])

    def test_weight_changed_after_the_hash_was_published(self):
        self.agree(self.d, "ok", expect=self.committed)
        raw = bytearray(_weights(self.d))
        raw[-1] ^= 0xff
        _put(self.d, bytes(raw))
        self.agree(self.d, "checkpoint_integrity", expect=self.committed)

    def test_header_round_changed_and_rehashed(self):
        _edit_header(self.d, lambda h: h.update(round_index=5))
        _rehash(self.d)
        self.agree(self.d, "checkpoint_integrity", expect=self.committed)

    def test_bad_expect_is_a_usage_error(self):
        for bad in ("abc", "g" * 64, "0" * 65):
            with self.assertRaises(ValueError):
                load_verified(self.d, expect=bad, framework=None)
        with self.assertRaises(TypeError):
            load_verified(self.d, expect=b"0" * 64, framework=None)


class ReadOnce(TempDirTest):
    """Every file is read exactly once, and nothing but the files."""

    def _count_reads(self, d):
        read = {}
        real_preadv, real_read = os.preadv, os.read

        def preadv(fd, bufs, off, *a):
            n = real_preadv(fd, bufs, off, *a)
            read.setdefault(os.readlink("/proc/self/fd/%d" % fd), []).append((off, n))
            return n

        def read_(fd, n):
            b = real_read(fd, n)
            read.setdefault(os.readlink("/proc/self/fd/%d" % fd), []).append((None, len(b)))
            return b
        with mock.patch("os.preadv", preadv), mock.patch("os.read", read_):
            r = load_verified(d, framework=None)
        return r, read

    def check(self, d):
        r, read = self._count_reads(d)
        names = ["header.json"] + list(_header(d)["weight_files"])
        if os.path.exists(os.path.join(d, "weights.index.json")):
            names.append("weights.index.json")
        self.assertEqual(sorted(read), sorted(os.path.join(os.path.realpath(d), n)
                                              for n in names))
        for path, reads in read.items():
            size = os.path.getsize(path)
            self.assertEqual(sum(n for _, n in reads), size, path)
            offs = [o for o, _ in reads if o is not None]
            pos = 0
            for o, n in reads:
                if o is not None:
                    self.assertEqual(o, pos, "%s read out of order or twice" % path)
                pos += n
            self.assertEqual(offs, sorted(offs))
        return r

    def test_small_artifact(self):
        d = os.path.join(self.tmp, "a")
        write_artifact(d, shards=[["encoder.a", "predictor.e"], ["encoder.b", "predictor.c",
                                                                 "predictor.d"]], index=True)
        self.check(d)

    def test_large_artifact_threaded(self):
        d = os.path.join(self.tmp, "big")
        rnd = os.urandom(1 << 20) * 9
        tensors = [("encoder.w%d" % i, "F32", (len(rnd) // 4,), rnd) for i in range(3)]
        # Stored in reverse name order: the hash wants the last bytes first.
        write_artifact(d, tensors[::-1])
        self.assertGreater(os.path.getsize(os.path.join(d, W)), 16 << 20)
        r = self.check(d)
        self.assertEqual(r["encoder.w1"].tobytes(), rnd)
        self.agree(d, "ok")


if __name__ == "__main__":
    unittest.main()
