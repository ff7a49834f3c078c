"""Knowledge base: curated and learned notes, indexed with SQLite FTS5 for retrieval into prompts.

`notes` parses and validates note files, `index` searches them (filtered by target, ranked lower
when measured elsewhere), `learn` writes what a run learned, `cli` is `kernelevolve kb`.
"""
from kernelevolve.knowledge.index import (CURATED_DIR, Hit, KnowledgeIndex, default_index,
                                          learned_notes_dir, user_notes_dir, workspace_index)
from kernelevolve.knowledge.learn import provenance_from_fingerprint, write_learned_note
from kernelevolve.knowledge.notes import KnowledgeError, Note, NoteError, parse_note, render_note
from kernelevolve.knowledge.staleness import staleness

__all__ = ["CURATED_DIR", "Hit", "KnowledgeError", "KnowledgeIndex", "Note", "NoteError",
           "default_index", "learned_notes_dir", "parse_note", "provenance_from_fingerprint",
           "render_note", "staleness", "user_notes_dir", "workspace_index", "write_learned_note"]
