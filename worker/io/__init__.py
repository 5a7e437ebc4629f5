"""File formats: NIfTI and MRtrix images, MRtrix fixel directories, DIPY ``.pam5``, the conv
arrays and the Tucker ``.npz``, read with header checks before any data; every write goes
through a temporary name and a rename."""
