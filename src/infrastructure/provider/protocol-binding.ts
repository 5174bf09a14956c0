/** The RPC names that differ between protocol 5 and 6; the messages share shapes. */
export interface ProtocolBinding {
  version: 5 | 6;
  getSchema: string;
  configure: string;
  stop: string;
}

export const PROTOCOL_5: ProtocolBinding = {
  version: 5,
  getSchema: 'GetSchema',
  configure: 'Configure',
  stop: 'Stop',
};

export const PROTOCOL_6: ProtocolBinding = {
  version: 6,
  getSchema: 'GetProviderSchema',
  configure: 'ConfigureProvider',
  stop: 'StopProvider',
};

export function bindingFor(version: number): ProtocolBinding | null {
  if (version === 5) return PROTOCOL_5;
  if (version === 6) return PROTOCOL_6;
  return null;
}
