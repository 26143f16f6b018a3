-- answered_model is the model the provider's answers name for a profile's
-- vectors: recorded from the first answer that names one, never changed
-- after. An answer naming another model is refused and none of its vectors
-- is kept, so a provider that starts serving another model under the
-- configured name never mixes its vectors into the profile. NULL while no
-- answer has named a model (a provider that names none, or a profile
-- recorded before answers were).
ALTER TABLE embedding_profiles
    ADD COLUMN answered_model text CHECK (length(answered_model) BETWEEN 1 AND 256);
