"""A ready-made ticket for the demo and the benchmark: the §8.3 shape, one Python spec."""

from __future__ import annotations

from agents.build.ticket import CLOSING


def demo_ticket(repo: str, spec: str = "tests/test_slugify.py", tiers: str | None = None) -> str:
    """A valid ticket for a slugify campaign at `repo` (the alias, usually)."""
    step2 = f"@py: SPEC: {repo}/{spec}\ntargets: slugify.py"
    if tiers:
        step2 += f"\ntiers={tiers}"
    return (
        "\n\n".join(
            [
                "PROBLEM\nslugify() should turn a title into a URL slug; there is none yet.",
                f"REPO\n{repo} (prepared and git-initialised)",
                "TRAPS\nReplacing only spaces passes one case and fails on punctuation.",
                f"STEP 1\n@testdesigner: the spec at {repo}/{spec} covers punctuation and "
                "slugs, and no regression: a string that is already a slug is unchanged.",
                f"STEP 2\n{step2}",
                "Constraints\nTouch nothing outside the build dir.",
                CLOSING,
            ]
        )
        + "\n"
    )
