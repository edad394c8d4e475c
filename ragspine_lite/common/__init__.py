"""Small shared homes: sensitivity constant, glossary, chat types, registry, trace."""
