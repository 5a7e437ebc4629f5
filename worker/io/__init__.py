"""File formats: NIfTI, the conv arrays and the Tucker ``.npz``, read with header checks
before any data; every write goes through a temporary name and a rename."""
