"""What the checks found: problems (each naming its file and what is wrong), and notes on
checks that could not run here (a tool missing), which never pass silently as checks."""

from dataclasses import dataclass, field


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: int = 0

    def problem(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def note(self, what: str) -> None:
        self.notes.append(what)

    def passed(self, count: int = 1) -> None:
        self.checked += count
