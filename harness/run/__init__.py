"""The run layer: the only code that starts processes or writes results/ (launch, execute, claim,
resume, lr-find)."""
