"""The operations console (Textual). Nothing outside this package imports textual."""
