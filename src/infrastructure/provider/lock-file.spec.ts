import { parseLockFile } from './lock-file';

const LOCK = `# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/aws" {
  version     = "5.100.0"
  constraints = "~> 5.0"
  hashes = [
    "h1:edXOJWE4ORX8Fm+dpVpICzMZJat4AX0VRCAy/xkcOc0=",
    "zh:0123", // a comment with a } brace
  ]
}

/* provider "registry.terraform.io/hashicorp/ignored" { version = "9.9.9" } */
provider "registry.terraform.io/Hashicorp/Random" {
  version = "3.6.2"
  hashes  = []
}

provider "example.com/acme/widget" {
  constraints = ">= 1.0"
}
`;

describe('.terraform.lock.hcl', () => {
  it('reads version, constraints and hashes per normalised source', () => {
    const locked = parseLockFile(LOCK);
    expect([...locked.keys()]).toEqual([
      'registry.terraform.io/hashicorp/aws',
      'registry.terraform.io/hashicorp/random',
    ]);
    expect(locked.get('registry.terraform.io/hashicorp/aws')).toEqual({
      version: '5.100.0',
      constraints: '~> 5.0',
      hashes: ['h1:edXOJWE4ORX8Fm+dpVpICzMZJat4AX0VRCAy/xkcOc0=', 'zh:0123'],
    });
    expect(locked.get('registry.terraform.io/hashicorp/random')).toEqual({
      version: '3.6.2',
      hashes: [],
    });
  });

  it('returns nothing for an empty file', () => {
    expect(parseLockFile('').size).toBe(0);
  });
});
