"""Entry points that export an ELMo model to deployable artefacts (SavedModel, TFLite)."""
