"""FastAPI/pydantic v2 style request validation for the lifecycle API.

Validation failures are FastAPI's 422 {"detail":[{"type","loc","msg","input"
[,"ctx"]}]}; this module produces those error dicts."""

import re

from .util import parse_iso


def err(type_, loc, msg, inp, ctx=None):
    d = {"type": type_, "loc": list(loc), "msg": msg, "input": inp}
    if ctx is not None:
        d["ctx"] = ctx
    return d


def missing(loc, inp):
    return err("missing", loc, "Field required", inp)


def check_str(v, loc, errors):
    if not isinstance(v, str):
        errors.append(err("string_type", loc, "Input should be a valid string", v))
        return False
    return True


def check_int(v, loc, errors):
    """pydantic lax int: ints, integral floats, numeric strings."""
    if isinstance(v, bool):
        errors.append(err("int_type", loc, "Input should be a valid integer", v))
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if v.is_integer():
            return int(v)
        errors.append(err("int_from_float", loc, "Input should be a valid integer, got a number with a fractional part", v))
        return None
    if isinstance(v, str):
        s = v.strip()
        if re.fullmatch(r"[+-]?\d+", s):
            return int(s)
        errors.append(err("int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", v))
        return None
    errors.append(err("int_type", loc, "Input should be a valid integer", v))
    return None


def check_dict_str(v, loc, errors, allow_none_values=False):
    if not isinstance(v, dict):
        errors.append(err("dict_type", loc, "Input should be a valid dictionary", v))
        return False
    ok = True
    for k, x in v.items():
        if x is None and allow_none_values:
            continue
        if not isinstance(x, str):
            errors.append(err("string_type", list(loc) + [k], "Input should be a valid string", x))
            ok = False
    return ok


def model_attrs(v, loc, errors):
    if not isinstance(v, dict):
        errors.append(err("model_attributes_type", loc,
                          "Input should be a valid dictionary or object to extract fields from", v))
        return False
    return True


def validate_create(body, min_timeout):
    """Returns a list of 422 error dicts (empty when valid)."""
    errors = []
    loc = ("body",)
    if body is None:
        return [missing(loc, None)]
    if not model_attrs(body, loc, errors):
        return errors
    img = body.get("image")
    if img is not None:
        if model_attrs(img, ("body", "image"), errors):
            if "uri" not in img:
                errors.append(missing(("body", "image", "uri"), img))
            else:
                check_str(img["uri"], ("body", "image", "uri"), errors)
            auth = img.get("auth")
            if auth is not None and model_attrs(auth, ("body", "image", "auth"), errors):
                for f in ("username", "password"):
                    if f not in auth:
                        errors.append(missing(("body", "image", "auth", f), auth))
                    else:
                        check_str(auth[f], ("body", "image", "auth", f), errors)
    sid = body.get("snapshotId", body.get("snapshot_id"))
    if sid is not None:
        check_str(sid, ("body", "snapshotId"), errors)
    t = body.get("timeout")
    if t is not None:
        n = check_int(t, ("body", "timeout"), errors)
        if n is not None and n < min_timeout:
            errors.append(err("greater_than_equal", ("body", "timeout"),
                              "Input should be greater than or equal to %d" % min_timeout, t, {"ge": min_timeout}))
    rl = body.get("resourceLimits", body.get("resource_limits"))
    if rl is not None:
        check_dict_str(rl, ("body", "resourceLimits"), errors)
    env = body.get("env")
    if env is not None:
        check_dict_str(env, ("body", "env"), errors, allow_none_values=True)
    md = body.get("metadata")
    if md is not None:
        check_dict_str(md, ("body", "metadata"), errors)
    ep = body.get("entrypoint")
    if ep is not None:
        if not isinstance(ep, list):
            errors.append(err("list_type", ("body", "entrypoint"), "Input should be a valid list", ep))
        else:
            for i, x in enumerate(ep):
                check_str(x, ("body", "entrypoint", i), errors)
            if len(ep) < 1:
                errors.append(err("too_short", ("body", "entrypoint"),
                                  "List should have at least 1 item after validation, not 0", ep,
                                  {"field_type": "List", "min_length": 1, "actual_length": 0}))
    np_ = body.get("networkPolicy", body.get("network_policy"))
    if np_ is not None and model_attrs(np_, ("body", "networkPolicy"), errors):
        da = np_.get("defaultAction", np_.get("default_action"))
        if da is not None:
            check_str(da, ("body", "networkPolicy", "defaultAction"), errors)
        eg = np_.get("egress")
        if eg is not None:
            if not isinstance(eg, list):
                errors.append(err("list_type", ("body", "networkPolicy", "egress"), "Input should be a valid list", eg))
            else:
                for i, r in enumerate(eg):
                    l = ("body", "networkPolicy", "egress", i)
                    if not model_attrs(r, l, errors):
                        continue
                    for f in ("action", "target"):
                        if f not in r:
                            errors.append(missing(l + (f,), r))
                        elif check_str(r[f], l + (f,), errors) and f == "target" and len(r[f]) < 1:
                            errors.append(err("string_too_short", l + (f,), "String should have at least 1 character", r[f], {"min_length": 1}))
    plat = body.get("platform")
    if plat is not None and model_attrs(plat, ("body", "platform"), errors):
        for f in ("os", "arch"):
            if f not in plat:
                errors.append(missing(("body", "platform", f), plat))
            else:
                check_str(plat[f], ("body", "platform", f), errors)
    sa = body.get("secureAccess", body.get("secure_access"))
    if sa is not None and not isinstance(sa, bool):
        errors.append(err("bool_type", ("body", "secureAccess"), "Input should be a valid boolean", sa))
    ext = body.get("extensions")
    if ext is not None:
        check_dict_str(ext, ("body", "extensions"), errors)
    if errors:
        return errors
    # the model validator
    has_image = img is not None and bool(img.get("uri", "").strip())
    has_snap = bool((sid or "").strip())
    if has_image == has_snap:
        return [value_error("Exactly one of image or snapshotId must be provided.", body)]
    if has_image and not ep:
        return [value_error("Entrypoint is required when image is provided.", body)]
    if rl is None:
        return [value_error("resourceLimits is required when poolRef is not provided.", body)]
    return []


def value_error(msg, body):
    return err("value_error", ("body",), "Value error, " + msg, body, {"error": {}})


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def metadata_problem(md):
    """Kubernetes label rules; returns an error message or None."""
    for k, v in md.items():
        if k.startswith("opensandbox.io/"):
            return "Metadata key '%s' uses the reserved prefix 'opensandbox.io/'." % k
        name = k
        if "/" in k:
            prefix, name = k.split("/", 1)
            if not prefix or len(prefix) > 253 or not _DNS_SUB.match(prefix):
                return "Invalid metadata key '%s': prefix must be a DNS subdomain." % k
        if not name or len(name) > 63 or not _LABEL_NAME.match(name):
            return "Invalid metadata key '%s': must be 63 characters or less, beginning and ending with an alphanumeric character with dashes, underscores, dots, and alphanumerics between." % k
        if v is None:
            continue
        if len(v) > 63 or not _LABEL_VALUE.match(v):
            return "Invalid metadata value '%s' for key '%s': must be 63 characters or less, beginning and ending with an alphanumeric character with dashes, underscores, dots, and alphanumerics between." % (v, k)
    return None


def parse_expiry(v, errors):
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        errors.append(err("datetime_type", ("body", "expiresAt"), "Input should be a valid datetime", v))
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return parse_iso(v)
    except ValueError:
        errors.append(err("datetime_from_date_parsing", ("body", "expiresAt"),
                          "Input should be a valid datetime or date, invalid character in year", v,
                          {"error": "invalid character in year"}))
        return None
