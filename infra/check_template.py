"""Offline validation of ``template.yaml``: the SAM transform, then cfn-lint on its output.

Owns turning the SAM template into the CloudFormation AWS would deploy, without credentials or
network: local ``CodeUri``/``ContentUri`` paths are rewritten to placeholder S3 URIs, a state
machine's local ``DefinitionUri`` is inlined as its ``Definition`` (so that cfn-lint checks the
ASL against its schema, and tests can read the definition CloudFormation gets), the template
is transformed with ``samtranslator`` (the library ``sam deploy`` relies on, through
CloudFormation's ``AWS::Serverless`` transform), and the result is linted with cfn-lint, which no
longer applies the SAM transform itself and so misses errors inside SAM resources. Conditions
(the upstream key's source) stay conditions in the output, so one transform covers every
parameter choice; warnings inside resources the transform generated are not ours to fix and are
left out (errors never are).

Used by ``infra/check_template.sh`` (CI) and by ``tests/deploy`` (which asserts the wiring on
:func:`transformed`). It must not need AWS credentials, Docker or the network, and must not
change the template.

Usage::

    python infra/check_template.py [--template template.yaml] [--region us-east-1]
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

__all__ = [
    "ROOT",
    "TEMPLATE",
    "TemplateError",
    "lint",
    "load_template",
    "main",
    "transform",
    "transformed",
    "unused_parameters",
]

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"

IGNORED_RULES = frozenset({"W2001"})
"""cfn-lint rules that cannot apply to a transformed template. W2001 (unused parameter): the
transform inlines parameter values into what it generates (the usage plan's limits, the
authorizer's cache TTL), so :func:`unused_parameters` checks the SAM template instead."""

_SHORT_FORMS = {
    "Ref": "Ref",
    "Condition": "Condition",
    **{
        name: f"Fn::{name}"
        for name in (
            "And",
            "Base64",
            "Cidr",
            "Equals",
            "FindInMap",
            "GetAZs",
            "If",
            "ImportValue",
            "Join",
            "Not",
            "Or",
            "Select",
            "Split",
            "Sub",
            "Transform",
            "GetAtt",
        )
    },
}


class TemplateError(Exception):
    """The template does not transform or does not lint cleanly."""


class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]
    """A YAML loader that reads CloudFormation's short forms (``!Ref x`` -> ``{"Ref": "x"}``)."""


def _short_form(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    name = _SHORT_FORMS.get(suffix)
    if name is None:
        raise yaml.constructor.ConstructorError(
            None, None, f"unknown tag !{suffix}", node.start_mark
        )
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if name == "Fn::GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _short_form)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The SAM template as plain data (short-form intrinsics expanded)."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader)  # noqa: S506
    if not isinstance(data, dict):
        raise TemplateError(f"{path} is not a mapping")
    return data


def _with_s3_code(template: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy with every local code path replaced by ``s3://responses-gateway-build/<path>``,
    what ``sam package`` would upload it as, and every local state machine ``DefinitionUri``
    (relative to ``base``) replaced by the ``Definition`` it holds."""
    result = copy.deepcopy(template)
    for resource in result.get("Resources", {}).values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            value = properties.get(key)
            if isinstance(value, str) and not value.startswith("s3://"):
                properties[key] = f"s3://responses-gateway-build/{value.strip('/') or 'root'}"
        definition_uri = properties.get("DefinitionUri")
        if isinstance(definition_uri, str) and not definition_uri.startswith("s3://"):
            path = base / definition_uri
            try:
                properties["Definition"] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TemplateError(f"DefinitionUri {definition_uri}: {exc}") from exc
            del properties["DefinitionUri"]
    return result


def transform(
    template: Mapping[str, Any],
    parameters: Mapping[str, str] | None = None,
    *,
    region: str = "us-east-1",
    base: Path = ROOT,
) -> dict[str, Any]:
    """The CloudFormation template the SAM transform makes of ``template``.

    Args:
        template: the SAM template.
        parameters: parameter values (defaults for the rest).
        region: the region to transform for.
        base: the directory local paths in the template are relative to.

    Raises:
        TemplateError: the transform refused the template (its messages are in the error).
    """
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    from samtranslator.model.exceptions import (  # type: ignore[import-untyped]
        InvalidDocumentException,
    )
    from samtranslator.parser.parser import Parser  # type: ignore[import-untyped]
    from samtranslator.translator.translator import Translator  # type: ignore[import-untyped]

    translator = Translator(managed_policy_map=None, sam_parser=Parser())
    try:
        output: dict[str, Any] = translator.translate(
            sam_template=_with_s3_code(dict(template), base),
            parameter_values=dict(parameters or {}),
            get_managed_policy_map=lambda: {},
        )
    except InvalidDocumentException as exc:
        causes = "; ".join(str(cause) for cause in exc.causes)
        raise TemplateError(f"SAM transform failed: {causes}") from exc
    return output


@functools.cache
def _transformed_json(region: str) -> str:
    return json.dumps(transform(load_template(), region=region))


def transformed(*, region: str = "us-east-1") -> dict[str, Any]:
    """The transformed ``template.yaml`` with default parameters (cached; a fresh copy)."""
    loaded: dict[str, Any] = json.loads(_transformed_json(region))
    return loaded


def _definitions_as_objects(cloudformation: Mapping[str, Any]) -> dict[str, Any]:
    """A copy in which every state machine definition the SAM transform joined into a
    ``DefinitionString`` (``Fn::Join`` of JSON lines, from an inline or inlined ``Definition``)
    is a ``Definition`` object again: cfn-lint checks a ``Definition`` against the States
    Language schema, never a joined string. The two deploy the same state machine."""
    result = copy.deepcopy(dict(cloudformation))
    for resource in result.get("Resources", {}).values():
        if resource.get("Type") != "AWS::StepFunctions::StateMachine":
            continue
        properties = resource.get("Properties") or {}
        joined = properties.get("DefinitionString")
        if not (isinstance(joined, dict) and set(joined) == {"Fn::Join"}):
            continue
        separator, lines = joined["Fn::Join"]
        if not all(isinstance(line, str) for line in lines):
            continue  # intrinsics inside: leave it to CloudFormation
        properties["Definition"] = json.loads(separator.join(lines))
        del properties["DefinitionString"]
    return result


def lint(
    cloudformation: Mapping[str, Any],
    *,
    region: str = "us-east-1",
    own_resources: frozenset[str] | None = None,
) -> list[str]:
    """cfn-lint's findings (errors and warnings) on a CloudFormation template, as text lines.

    Args:
        cloudformation: the transformed template.
        region: the region to lint for.
        own_resources: the logical ids written in the SAM template; warnings located in any
            other (generated) resource are left out. None keeps every finding.
    """
    from cfnlint.api import lint as cfn_lint  # type: ignore[import-untyped]

    findings: list[str] = []
    for match in cfn_lint(json.dumps(_definitions_as_objects(cloudformation)), regions=[region]):
        rule = str(match.rule.id)
        path = [str(part) for part in match.path]
        if rule in IGNORED_RULES:
            continue
        generated = (
            own_resources is not None
            and len(path) > 1
            and path[0] == "Resources"
            and path[1] not in own_resources
        )
        if generated and not rule.startswith("E"):
            continue
        findings.append(f"{rule} {match.message} ({'/'.join(path)})")
    return findings


def unused_parameters(template: Mapping[str, Any]) -> list[str]:
    """Parameters the SAM template never references (``Ref`` or ``${Name}`` in a ``Sub``)."""
    text = json.dumps({k: v for k, v in template.items() if k != "Parameters"})
    unused = []
    for name in template.get("Parameters", {}):
        ref = json.dumps({"Ref": name})
        if ref not in text and not re.search(r"\$\{" + re.escape(name) + r"\}", text):
            unused.append(name)
    return unused


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    template = load_template(args.template)
    problems = [f"parameter {name} is never used" for name in unused_parameters(template)]
    try:
        output = transform(template, region=args.region, base=args.template.resolve().parent)
    except TemplateError as exc:
        problems.append(str(exc))
    else:
        problems += lint(output, region=args.region, own_resources=frozenset(template["Resources"]))
    for problem in problems:
        print(f"{args.template.name}: {problem}", file=sys.stderr)
    status = "FAILED" if problems else "ok"
    print(f"{args.template.name}: SAM transform + cfn-lint {status}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
