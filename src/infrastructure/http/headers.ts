/** The version (ours: 1, 2, 3…) a terraform GET served; read by `kl show`. */
export const STATE_VERSION_HEADER = 'X-Kilolock-State-Version';
