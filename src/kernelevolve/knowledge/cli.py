"""`kernelevolve kb`: list, search, show, add and validate knowledge notes.

The main app registers this with `app.add_typer(kb_app, name="kb")`. Output is plain aligned text
(or JSON with `--json`) rather than rich tables so it pipes and greps cleanly. User mistakes go
through the main CLI's `_user_errors` (one line on stderr, exit 2); it is imported when a command
runs, not at module import, because `kernelevolve.cli` imports this module.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer

from kernelevolve.knowledge.index import (CURATED_DIR, KnowledgeIndex, check_target,
                                          user_notes_dir, workspace_index)
from kernelevolve.knowledge.notes import (KnowledgeError, Note, NoteError, parse_note,
                                          render_note)

kb_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                     context_settings={"help_option_names": ["-h", "--help"]},
                     rich_markup_mode=None,
                     help="Knowledge base: curated and learned notes retrieved into prompts.")

NOTES_OPT = typer.Option(None, "--notes", metavar="DIR", help="Extra folder of notes (repeatable).")
WORKSPACE_OPT = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR",
                             show_default=False,
                             help="Workspace whose knowledge/ folders are searched too "
                                  "(./.kernelevolve).")
PLATFORM_OPT = typer.Option(None, "--platform", metavar="NAME",
                            help="Only notes for this platform (`kernelevolve targets` lists them).")
LANGUAGE_OPT = typer.Option(None, "--language", metavar="NAME",
                            help="Only notes for this language (`kernelevolve targets` lists them).")


def _user_errors():
    from kernelevolve.cli_errors import user_errors as handler

    return handler()


def _index(workspace: Path, notes: Optional[list[Path]]) -> KnowledgeIndex:
    index = workspace_index(workspace, list(notes or []))
    for line in index.errors:  # a broken user note should not hide the others: warn and go on
        typer.echo(f"warning: skipped {line}", err=True)
    return index


def _row(note: Note) -> dict:
    return {"id": note.id, "title": note.title, "platforms": note.platforms,
            "languages": note.languages, "tags": note.tags, "source": note.source,
            "confidence": note.confidence, "created": note.created.isoformat(),
            "expires": note.expires.isoformat() if note.expires else None,
            "path": str(note.path) if note.path else None}


@kb_app.command("list")
def list_cmd(platform: Optional[str] = PLATFORM_OPT, language: Optional[str] = LANGUAGE_OPT,
             notes: Optional[list[Path]] = NOTES_OPT, workspace: Path = WORKSPACE_OPT,
             as_json: bool = typer.Option(False, "--json", help="JSON lines.")) -> None:
    """List notes: id, title, platforms, languages, source, confidence, expiry."""
    with _user_errors():
        platform, language = check_target(platform, language)
        chosen = [n for n in _index(workspace, notes).all() if n.matches(platform, language)]
        if as_json:
            for note in chosen:
                typer.echo(json.dumps(_row(note)))
            return
        rows = [("ID", "PLATFORMS", "LANGUAGES", "SOURCE", "CONF", "EXPIRES", "TITLE")]
        for note in chosen:
            expiry = "expired" if note.expired() else (note.expires.isoformat()
                                                       if note.expires else "never")
            rows.append((note.id, ",".join(note.platforms), ",".join(note.languages),
                         note.source, f"{note.confidence:.2f}", expiry, note.title))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])


@kb_app.command("search")
def search_cmd(query: str = typer.Argument(..., metavar="QUERY", help="Words to search for."),
               platform: Optional[str] = PLATFORM_OPT, language: Optional[str] = LANGUAGE_OPT,
               k: int = typer.Option(5, "-k", metavar="N", show_default=False,
                                     help="How many notes to return (5)."),
               fingerprint: Optional[Path] = typer.Option(
                   None, "--fingerprint", metavar="FILE", help="JSON fingerprint (or an eval --json result) to "
                                               "compare provenance against."),
               notes: Optional[list[Path]] = NOTES_OPT, workspace: Path = WORKSPACE_OPT,
               as_json: bool = typer.Option(False, "--json", help="JSON array.")) -> None:
    """Rank notes for QUERY; stale notes (measured elsewhere) are marked with the reason."""
    with _user_errors():
        fp = _load_fingerprint(fingerprint) if fingerprint else None
        hits = _index(workspace, notes).search(query, platform=platform, language=language,
                                               fingerprint=fp, k=k)
        if as_json:
            typer.echo(json.dumps([{"rank": i, "score": round(h.score, 6), "stale": h.stale,
                                    "why": h.why, **_row(h.note)}
                                   for i, h in enumerate(hits, 1)], indent=2))
            return
        if not hits:
            typer.echo("no matching notes")
        for i, hit in enumerate(hits, 1):
            mark = "  [stale]" if hit.stale else ""
            typer.echo(f"{i:>2}. {hit.score:7.3f}  {hit.note.id}  {hit.note.title}{mark}")
            typer.echo(f"      {hit.why}")


@kb_app.command("show")
def show_cmd(note_id: str = typer.Argument(..., metavar="ID", help="Note id."),
             notes: Optional[list[Path]] = NOTES_OPT, workspace: Path = WORKSPACE_OPT) -> None:
    """Print a note (front matter and body)."""
    with _user_errors():
        note = _index(workspace, notes).get(note_id)
        typer.echo(render_note(note), nl=False)


@kb_app.command("add")
def add_cmd(file: Path = typer.Argument(..., metavar="FILE", help="Note file (markdown with front matter)."),
            workspace: Path = WORKSPACE_OPT,
            force: bool = typer.Option(False, "--force", help="Replace a different note that "
                                                              "has the same id.")) -> None:
    """Validate FILE and copy it into WORKSPACE/knowledge/notes/ID.md."""
    with _user_errors():
        note = parse_note(file)
        dest_dir = user_notes_dir(workspace)
        dest = dest_dir / f"{note.id}.md"
        if dest.exists() and dest.resolve() != file.resolve() and not force:
            if dest.read_bytes() != file.read_bytes():
                raise KnowledgeError(f"{dest} already holds a different note with id "
                                     f"{note.id!r}; pass --force to replace it")
        dest_dir.mkdir(parents=True, exist_ok=True)
        if dest.resolve() != file.resolve():
            shutil.copyfile(file, dest)
        shadow = " (overrides the curated note)" if (CURATED_DIR / f"{note.id}.md").exists() else ""
        typer.echo(f"added {note.id} -> {dest}{shadow}")


@kb_app.command("validate")
def validate_cmd(paths: Optional[list[Path]] = typer.Argument(
        None, metavar="PATH...", help="Note files or folders (the curated notes).")) -> None:
    """Check notes; prints one line per fault and exits 1 when any note is invalid."""
    with _user_errors():
        files: list[Path] = []
        for path in paths or [CURATED_DIR]:
            if path.is_dir():
                files.extend(sorted(path.glob("*.md")))
            elif path.is_file():
                files.append(path)
            else:
                raise KnowledgeError(f"{path}: no such file or folder")
    faults: list[str] = []
    seen: dict[str, Path] = {}
    for path in files:
        try:
            note = parse_note(path)
        except NoteError as exc:
            faults.append(str(exc))
            continue
        if note.id in seen:  # the index would silently keep only one of them
            faults.append(f"{path}: duplicate id {note.id!r}, also in {seen[note.id]}")
        seen.setdefault(note.id, path)
    for line in faults:
        typer.echo(line)
    typer.echo(f"{len(files) - len(faults)} of {len(files)} notes valid"
               if faults else f"ok: {len(files)} notes valid")
    raise typer.Exit(1 if faults else 0)


def _load_fingerprint(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise KnowledgeError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("fingerprint"), dict):
        data = data["fingerprint"]  # an `eval --json` result holds it under "fingerprint"
    if not isinstance(data, dict):
        raise KnowledgeError(f"{path}: expected a JSON object with fingerprint fields")
    return data
