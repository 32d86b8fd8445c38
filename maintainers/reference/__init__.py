"""The reference runs of the solved notebooks and their pages in docs/results/ (README.md here)."""
