"""The system packages some tests need beyond pip's: what each adds, and the line that installs it
(Debian and Ubuntu). Where one is missing, its tests skip and say that line; the README names them
and .ci/run installs them all, so CI runs every test (tests/test_system_packages.py checks both)."""

import shutil
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class SystemPackage:
    packages: tuple[str, ...]  # the apt packages
    commands: tuple[tuple[str, ...], ...]  # each needed program, by any of its names
    adds: str  # what its tests check

    @property
    def install(self) -> str:
        return f"apt-get install -y {' '.join(self.packages)}"

    def missing(self) -> list[str]:
        """The needed programs not on PATH (the first name of each)."""
        return [names[0] for names in self.commands if not any(shutil.which(name) for name in names)]

    def skip_reason(self) -> str | None:
        """Why its tests cannot run here (the programs missing and the line that installs them)."""
        missing = self.missing()
        return f"{', '.join(missing)} not installed: {self.install}" if missing else None

    def needed(self) -> pytest.MarkDecorator:
        """Mark a test that needs the package: skipped, with the install line, where it is missing."""
        reason = self.skip_reason()
        return pytest.mark.skipif(reason is not None, reason=reason or "")


CHROMIUM = SystemPackage(
    packages=("chromium",),
    commands=(("chromium", "chromium-browser"),),  # whichshot.report.screenshot.chromium's names
    adds="headless Chromium lays out and screenshots the report (its width, the README's picture)",
)
SLURM = SystemPackage(
    packages=("slurmctld", "slurmd", "slurm-client", "munge"),
    commands=tuple(
        (name,) for name in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "srun")
    ),
    adds="a private Slurm on this machine runs the workflow's Slurm profile (tests/test_e2e_slurm.py)",
)
OPTIONAL = (CHROMIUM, SLURM)
